// Issue 31's Messages points, through the official @anthropic-ai/sdk (run
// by tests/messages_test.go's TestAnthropicSDKChecks with NODE_PATH set to
// the pinned node_modules): structured outputs (output_config.format) held
// by the grammar and parsed by the SDK's own helper, the checks Anthropic
// makes (tool names, a prefill's trailing whitespace) as typed 400s,
// request-id on every answer, message_start's usage equal to
// message_delta's, and errors naming Anthropic's fields.
// Environment: LLMSERVE_URL (no /v1), LLMSERVE_MODEL.
// Exits non-zero, naming the failed check.
'use strict';
const Anthropic = require('@anthropic-ai/sdk');
const { jsonSchemaOutputFormat } = require('@anthropic-ai/sdk/helpers/json-schema');

const baseURL = process.env.LLMSERVE_URL;
const model = process.env.LLMSERVE_MODEL;

function check(cond, what, value) {
  if (!cond) {
    throw new Error(`check failed: ${what}: ${JSON.stringify(value)}`);
  }
}

async function badRequest(what, p, pattern) {
  try {
    await p;
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError && e.status === 400 && e.error.type === 'error' &&
      e.error.error.type === 'invalid_request_error', `${what}: a typed 400`, e.error || String(e));
    check(pattern.test(e.error.error.message), `${what}: message`, e.error.error.message);
    check(typeof e.requestID === 'string' && e.requestID.startsWith('req_'), `${what}: request-id`, e.requestID);
    return e.error.error.message;
  }
  check(false, `${what} was accepted`, null);
}

async function main() {
  const client = new Anthropic({ apiKey: 'unused', baseURL, maxRetries: 0 });
  const user = [{ role: 'user', content: 'Once upon a time, Lily' }];

  // Structured outputs: the answer is held to the schema and parses.
  const schema = {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Paris', 'London'] }, days: { type: 'integer' } },
    required: ['city', 'days'],
    additionalProperties: false,
  };
  const parsed = await client.messages.parse({
    model, max_tokens: 96, temperature: 0, messages: user,
    output_config: { format: jsonSchemaOutputFormat(schema) },
  });
  const out = parsed.parsed_output;
  check(out && ['Paris', 'London'].includes(out.city) && Number.isInteger(out.days), 'structured output', parsed.content);
  check(parsed.stop_reason === 'end_turn', 'structured output ends the answer', parsed.stop_reason);
  const streamed = client.messages.stream({
    model, max_tokens: 96, temperature: 0, messages: user,
    output_config: { format: { type: 'json_schema', schema } },
  });
  const final = await streamed.finalMessage();
  check(JSON.stringify(JSON.parse(final.content[0].text)) === JSON.stringify(out), 'streamed structured output', final.content);
  await badRequest('a schema the grammar cannot hold', client.messages.create({
    model, max_tokens: 8, messages: user,
    output_config: { format: { type: 'json_schema', schema: { type: 'object', properties: { a: { type: 'string', format: 'no-such-format' } } } } },
  }), /^output_config\.format\.schema/);

  // The checks Anthropic makes.
  await badRequest('a tool name with a space', client.messages.create({
    model, max_tokens: 8, messages: user,
    tools: [{ name: 'get weather', input_schema: { type: 'object' } }],
  }), /tools\[0\]\.name: String should match pattern '\^\[a-zA-Z0-9_-\]\{1,128\}\$'/);
  await badRequest('a tool name of 129 characters', client.messages.create({
    model, max_tokens: 8, messages: user,
    tools: [{ name: 'x'.repeat(129), input_schema: { type: 'object' } }],
  }), /tools\[0\]\.name/);
  await badRequest('a prefill ending in whitespace', client.messages.create({
    model, max_tokens: 8, messages: [...user, { role: 'assistant', content: 'She went \n' }],
  }), /final assistant content cannot end with trailing whitespace/);
  const prefill = await client.messages.create({
    model, max_tokens: 8, temperature: 0, messages: [...user, { role: 'assistant', content: 'She went' }],
  });
  check(prefill.content.length === 1 && prefill.content[0].type === 'text', 'a prefill without whitespace', prefill.content);

  // Errors name Anthropic's fields.
  await badRequest('tool_choice naming no tool', client.messages.create({
    model, max_tokens: 8, messages: user,
    tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
    tool_choice: { type: 'tool', name: 'get_time' },
  }), /^tool_choice\.name/);

  // request-id on a successful answer, created and streamed.
  const { data: msg, response } = await client.messages.create({ model, max_tokens: 8, temperature: 0, messages: user }).withResponse();
  const rid = response.headers.get('request-id');
  check(rid && rid.startsWith('req_') && msg.id === 'msg_' + rid.slice(4), 'request-id and the message id', [rid, msg.id]);
  const s = client.messages.stream({ model, max_tokens: 8, temperature: 0, messages: user });
  const { response: sr } = await s.withResponse();
  check((sr.headers.get('request-id') || '').startsWith('req_'), 'request-id on a stream', sr.headers.get('request-id'));

  // message_start's usage is message_delta's, on a prompt the prefix
  // cache has seen (the requests above).
  let start = null;
  let delta = null;
  const raw = await client.messages.create({ model, max_tokens: 8, temperature: 0, messages: user, stream: true });
  for await (const ev of raw) {
    if (ev.type === 'message_start') start = ev.message.usage;
    if (ev.type === 'message_delta') delta = ev.usage;
  }
  check(start && delta && start.cache_read_input_tokens > 0, 'the prompt was read from the cache', [start, delta]);
  check(start.input_tokens === delta.input_tokens && start.cache_read_input_tokens === delta.cache_read_input_tokens,
    'message_start usage equals message_delta usage', [start, delta]);

  // What Claude Code sends is accepted: adaptive thinking shown or
  // omitted, output_config.effort, context_management, cache_control, a
  // system message in the conversation, on its ?beta=true path.
  const cc = await client.beta.messages.create({
    model, max_tokens: 16, temperature: 0,
    thinking: { type: 'adaptive', display: 'omitted' },
    output_config: { effort: 'high' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    metadata: { user_id: 'someone' },
    system: [{ type: 'text', text: 'You tell stories.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Once upon a time, Lily', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
      { role: 'system', content: 'Keep it short.' },
    ],
    betas: ['context-management-2025-06-27', 'interleaved-thinking-2025-05-14'],
  });
  check(cc.type === 'message' && cc.content.length > 0, "Claude Code's fields", cc);

  console.log(JSON.stringify({ ok: true, structured: out }));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
