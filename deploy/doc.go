// Package deploy tests llmserve's deployment files, which live beside it:
// the Dockerfiles (docker/), the Kubernetes manifests (kubernetes/) and the
// Helm chart (helm/llmserve). It is its own Go module so that the server's
// go.mod does not carry Kubernetes, Helm and BuildKit; `make test-deploy`
// (part of `make test`) runs it.
//
// The tests decode every manifest, and every document the chart renders in
// each mode, strictly (an unknown field is an error) into the upstream Go
// types: k8s.io/api for Deployments and Services, and, because the Go module
// proxy serves neither sigs.k8s.io/lws nor github.com/kserve/kserve, typed
// structs in crd_test.go that mirror those projects' API types field for
// field (LeaderWorkerSet v1, ServingRuntime v1alpha1, InferenceService
// v1beta1), built from k8s.io/api's pod and container types. They then check
// what ties the files to the binary: every argument is a flag of the
// subcommand it is given to (serve's flags read from cmd/llmserve/serve.go,
// worker's and head's from the names fixed for them, in flags_test.go), the
// ports and probes match the flags, Services select pods that have the ports
// they target, and terminationGracePeriodSeconds covers the drain time.
package deploy
