// Starts Swagger UI on the embedded OpenAPI document; nothing is loaded
// from outside the server.
window.ui = SwaggerUIBundle({
  url: "/v2/docs/dataplane.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
});
