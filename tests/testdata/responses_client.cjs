// The official openai npm package (pinned by `make node-clients`) against
// llmserve's Responses API. Run by tests/responses_test.go with BASE_URL,
// MODEL and NODE_PATH set; it exits non-zero, saying why, when anything is
// not as OpenAI documents it, and prints a JSON summary otherwise.
'use strict';
const mod = require('openai');
const OpenAI = mod.default || mod.OpenAI || mod;

const client = new OpenAI({ baseURL: process.env.BASE_URL + '/v1', apiKey: 'unused', maxRetries: 0 });
const model = process.env.MODEL;

function check(cond, what, got) {
  if (!cond) {
    throw new Error(what + (got === undefined ? '' : ': ' + JSON.stringify(got)));
  }
}

function checkUsage(r) {
  const u = r.usage;
  check(u && u.input_tokens > 0 && u.output_tokens > 0, 'usage counts', u);
  check(u.total_tokens === u.input_tokens + u.output_tokens, 'usage total', u);
  check(typeof u.input_tokens_details.cached_tokens === 'number', 'cached_tokens', u);
  check(typeof u.output_tokens_details.reasoning_tokens === 'number', 'reasoning_tokens', u);
}

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

async function main() {
  const out = {};
  const base = { model, input: 'Once upon a time', max_output_tokens: 24, temperature: 0 };

  // Not streamed.
  const r1 = await client.responses.create(base);
  check(r1.object === 'response' && r1.id.startsWith('resp_'), 'response object', r1);
  check(r1.status === 'completed' || r1.status === 'incomplete', 'status', r1.status);
  if (r1.status === 'incomplete') {
    check(r1.incomplete_details.reason === 'max_output_tokens', 'incomplete_details', r1.incomplete_details);
  }
  check(r1.output.length === 1 && r1.output[0].type === 'message', 'output', r1.output);
  check(r1.output[0].content[0].type === 'output_text', 'output_text part', r1.output[0]);
  check(r1.output_text.length > 0, 'output_text (the SDK joins it)', r1.output_text);
  check(r1.model === model && r1.store === true && r1.temperature === 0, 'echo of the settings', r1);
  checkUsage(r1);
  out.text = r1.output_text;

  // Streamed: the documented sequence, numbered, the same greedy text.
  const stream = await client.responses.create({ ...base, stream: true });
  const types = [];
  let seq = -1;
  let text = '';
  let final;
  for await (const ev of stream) {
    check(ev.sequence_number === seq + 1, 'sequence_number', ev);
    seq = ev.sequence_number;
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.output_text.done') check(ev.text === text, 'output_text.done text', ev);
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  const want = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];
  check(JSON.stringify(types.slice(0, 4)) === JSON.stringify(want), 'stream starts', types);
  check(types.includes('response.output_text.delta'), 'deltas', types);
  const tail = types.slice(-4);
  check(tail[0] === 'response.output_text.done' && tail[1] === 'response.content_part.done' && tail[2] === 'response.output_item.done', 'stream ends', types);
  check(final && text === r1.output_text && final.output[0].content[0].text === text, 'streamed text equals the unstreamed', { text, want: r1.output_text });
  checkUsage(final);
  out.events = types.length;

  // The SDK's stream helper and its final response.
  const helper = client.responses.stream(base);
  const fin = await helper.finalResponse();
  check(fin.output_text === r1.output_text, 'responses.stream finalResponse', fin.output_text);

  // A function tool round trip: tool_choice forces the call (stories260K
  // would not call a tool by itself); the output goes back as a
  // function_call_output item on the stored conversation.
  const call = await client.responses.create({
    model, input: 'What is the weather in Paris?', tools: [weather],
    tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 40, temperature: 0,
  });
  const fc = call.output.find((o) => o.type === 'function_call');
  check(fc && fc.name === 'get_weather' && fc.call_id, 'function_call item', call.output);
  const args = JSON.parse(fc.arguments);
  check(args.city === 'Paris' || args.city === 'Rome', 'arguments by the schema', fc.arguments);
  const answer = await client.responses.create({
    model, previous_response_id: call.id, tools: [weather], max_output_tokens: 16, temperature: 0,
    input: [{ type: 'function_call_output', call_id: fc.call_id, output: 'Sunny, 21 C' }],
  });
  check(answer.status !== 'failed' && answer.output[0].type === 'message', 'answer after the tool output', answer);
  out.tool = fc.arguments;

  // The forced call streamed.
  const cstream = await client.responses.create({
    model, input: 'Weather?', tools: [weather], tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 40, temperature: 0, stream: true,
  });
  let argText = '';
  let argsDone;
  for await (const ev of cstream) {
    if (ev.type === 'response.function_call_arguments.delta') argText += ev.delta;
    if (ev.type === 'response.function_call_arguments.done') argsDone = ev.arguments;
  }
  check(argsDone !== undefined && argsDone === argText && JSON.parse(argText).city, 'streamed arguments', { argText, argsDone });

  // Three turns on a stored conversation: each turn's prompt extends the
  // last, so the prefix cache serves a growing part of it.
  const turns = ['Lily went to the park with her mom.', 'Then she saw a big dog.', 'The dog wanted to play.'];
  let prev;
  const cached = [];
  const inputs = [];
  for (const input of turns) {
    const r = await client.responses.create({ model, input, previous_response_id: prev, max_output_tokens: 24, temperature: 0 });
    check(r.previous_response_id === (prev === undefined ? null : prev), 'previous_response_id echo', r.previous_response_id);
    cached.push(r.usage.input_tokens_details.cached_tokens);
    inputs.push(r.usage.input_tokens);
    prev = r.id;
  }
  check(inputs[1] > inputs[0] && inputs[2] > inputs[1], 'input tokens grow over turns', inputs);
  check(cached[1] > 0 && cached[2] > cached[1], 'cached_tokens grow over turns', cached);
  out.cached = cached;

  // Stored: retrieve, input items, delete.
  const got = await client.responses.retrieve(prev);
  check(got.id === prev && got.output_text.length > 0, 'retrieve', got);
  const items = await client.responses.inputItems.list(prev);
  check(items.data.length === 1 && items.data[0].type === 'message' && items.data[0].content[0].text === turns[2], 'input_items', items.data);
  const del = await client.responses.delete(prev);
  let status;
  try {
    await client.responses.retrieve(prev);
  } catch (e) {
    status = e.status;
  }
  check(status === 404, 'retrieve after delete', status);

  // An unknown previous_response_id is OpenAI's 400 previous_response_not_found.
  try {
    await client.responses.create({ model, input: 'x', previous_response_id: 'resp_missing' });
    check(false, 'unknown previous_response_id accepted');
  } catch (e) {
    check(e instanceof mod.BadRequestError && e.status === 400 && e.code === 'previous_response_not_found' && e.param === 'previous_response_id',
      'unknown previous_response_id', { status: e.status, error: e.error });
  }

  // A json_schema text.format needs a name of a-z, A-Z, 0-9, _ and -, at
  // most 64 characters: a 400 naming text.format.name, as OpenAI's.
  const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
  for (const name of [undefined, 'has space', 'n'.repeat(65)]) {
    try {
      await client.responses.create({ model, input: 'x', text: { format: { type: 'json_schema', name, schema } } });
      check(false, 'json_schema name accepted: ' + name);
    } catch (e) {
      check(e instanceof mod.BadRequestError && e.param === 'text.format.name', 'json_schema name ' + name, { status: e.status, error: e.error });
    }
  }
  const named = await client.responses.create({ model, input: 'x', max_output_tokens: 40, temperature: 0,
    text: { format: { type: 'json_schema', name: 'answer_v1-x', schema, strict: true } } });
  check(named.status === 'completed' || named.status === 'incomplete', 'a well-named json_schema', named.status);

  // An incomplete response's message item is incomplete too, unstreamed
  // and streamed.
  const cut = await client.responses.create({ model, input: 'Once upon a time', max_output_tokens: 2, temperature: 0 });
  check(cut.status === 'incomplete' && cut.output[0].type === 'message' && cut.output[0].status === 'incomplete', 'incomplete message item', cut.output);
  const cutStream = await client.responses.create({ model, input: 'Once upon a time', max_output_tokens: 2, temperature: 0, stream: true });
  let itemDone;
  let cutFinal;
  for await (const ev of cutStream) {
    if (ev.type === 'response.output_item.done') itemDone = ev.item;
    if (ev.type === 'response.incomplete') cutFinal = ev.response;
  }
  check(itemDone && itemDone.status === 'incomplete' && cutFinal && cutFinal.output[0].status === 'incomplete', 'streamed incomplete message item', { itemDone, cutFinal });

  // What Codex sends beside its tools: namespace and custom tools, a
  // hosted tool, include, prompt_cache_key, client_metadata, store false,
  // truncation auto. The namespaced function comes back under its own
  // name with its namespace; the forced custom tool's input follows its
  // grammar.
  const agentTools = [
    { type: 'namespace', name: 'mcp_weather', description: 'Weather tools', tools: [weather] },
    { type: 'custom', name: 'digits', description: 'A number.', format: { type: 'grammar', syntax: 'regex', definition: '[0-9]{1,4}' } },
    { type: 'web_search' },
  ];
  const agentBase = { model, input: 'Weather?', tools: agentTools, store: false, include: ['reasoning.encrypted_content'],
    prompt_cache_key: 'session-1', client_metadata: { turn_id: 't1' }, truncation: 'auto', max_output_tokens: 40, temperature: 0 };
  const ns = await client.responses.create({ ...agentBase, tool_choice: { type: 'function', namespace: 'mcp_weather', name: 'get_weather' } });
  const nsCall = ns.output.find((i) => i.type === 'function_call');
  check(nsCall && nsCall.name === 'get_weather' && nsCall.namespace === 'mcp_weather' && JSON.parse(nsCall.arguments).city, 'namespaced call', ns.output);
  const custom = await client.responses.create({ ...agentBase, tool_choice: { type: 'custom', name: 'digits' } });
  const cc = custom.output.find((i) => i.type === 'custom_tool_call');
  check(cc && cc.name === 'digits' && /^[0-9]{1,4}$/.test(cc.input), 'forced custom tool call', custom.output);
  out.custom = cc.input;

  // A background stream resumes: read three events, drop the connection,
  // and retrieve the rest with starting_after; the generation went on.
  const bg = await client.responses.create({ model, input: 'Once upon a time', max_output_tokens: 16, temperature: 0, background: true, stream: true });
  const firstEvents = [];
  for await (const ev of bg) {
    firstEvents.push(ev);
    if (firstEvents.length === 3) break;
  }
  const bgID = firstEvents[0].response.id;
  check(firstEvents[0].type === 'response.created' && firstEvents[0].response.background === true, 'background stream start', firstEvents[0]);
  const rest = await client.responses.retrieve(bgID, { stream: true, starting_after: firstEvents[2].sequence_number });
  const seqs = [];
  let bgFinal;
  for await (const ev of rest) {
    seqs.push(ev.sequence_number);
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') bgFinal = ev.response;
  }
  check(seqs[0] === 3 && seqs.every((n, i) => n === 3 + i) && bgFinal && bgFinal.id === bgID, 'resumed background stream', { seqs, bgFinal });
  const bgStored = await client.responses.retrieve(bgID);
  check(bgStored.status === bgFinal.status && bgStored.output_text === bgFinal.output.map((i) => (i.content || []).map((c) => c.text).join('')).join(''), 'stored background response', bgStored);
  out.resumed = seqs.length;
  void del;
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error('FAIL: ' + (e && e.stack ? e.stack : e));
  process.exit(1);
});
