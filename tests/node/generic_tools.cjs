// The generic tool format (issue 31 item 1) through the official SDKs:
// @anthropic-ai/sdk for Messages, openai for Responses. Run by
// tests/generic_tools_test.go with NODE_PATH set to the pinned
// node_modules. Environment: LLMSERVE_URL (the embedded model as it is),
// LLMSERVE_SCRIPTED_URL (the same model scripted to answer in the generic
// format: a call while the tools are offered, {"response": ...} once the
// tool's result is in), LLMSERVE_MODEL, TOOL_DESCRIPTION_TOKENS (the
// tokens of the tool's description as the system prompt writes it).
// Exits non-zero, naming the failed check.
'use strict';
const Anthropic = require('@anthropic-ai/sdk');
const OpenAI = require('openai');

const model = process.env.LLMSERVE_MODEL;
const descTokens = Number(process.env.TOOL_DESCRIPTION_TOKENS);

function check(cond, what, value) {
  if (!cond) {
    throw new Error(`check failed: ${what}: ${JSON.stringify(value)}`);
  }
}

const schema = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'London'] } },
  required: ['city'],
};
const question = 'What is the weather in Paris?';

async function messages(out) {
  const client = new Anthropic({ apiKey: 'unused', baseURL: process.env.LLMSERVE_URL, maxRetries: 0 });
  const tools = [{ name: 'get_weather', description: 'The weather in a city.', input_schema: schema }];
  const ask = { model, messages: [{ role: 'user', content: question }] };

  // count_tokens: the tool's description is in the prompt.
  const without = await client.messages.countTokens(ask);
  const withTools = await client.messages.countTokens({ ...ask, tools });
  check(withTools.input_tokens >= without.input_tokens + descTokens, 'count_tokens with the tool', [withTools, without, descTokens]);
  out.messages_count = [without.input_tokens, withTools.input_tokens];

  // tool_choice any: the constrained answer is a tool_use block. Greedy:
  // sampled, the grammar lets the toy model spend max_tokens on whitespace
  // inside the JSON now and then (a failure in 1 of ~80 runs).
  const call = await client.messages.create({
    ...ask, tools, max_tokens: 120, temperature: 0, tool_choice: { type: 'any', disable_parallel_tool_use: true },
  });
  check(call.stop_reason === 'tool_use', 'forced call stop_reason', call);
  const use = call.content.find((b) => b.type === 'tool_use');
  check(use && use.name === 'get_weather' && use.id.startsWith('toolu_') && ['Paris', 'London'].includes(use.input.city), 'tool_use block', call.content);
  const counted = await client.messages.countTokens({ ...ask, tools, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
  check(call.usage.input_tokens + call.usage.cache_read_input_tokens === counted.input_tokens, 'usage counts the tools', [call.usage, counted]);

  // auto, scripted: the call, then the answer to its result.
  const scripted = new Anthropic({ apiKey: 'unused', baseURL: process.env.LLMSERVE_SCRIPTED_URL, maxRetries: 0 });
  const turn1 = await scripted.messages.create({ ...ask, tools, max_tokens: 100 });
  const u1 = turn1.content.find((b) => b.type === 'tool_use');
  check(turn1.stop_reason === 'tool_use' && turn1.content.length === 1 && u1.name === 'get_weather' && u1.input.city === 'Paris', 'auto call', turn1);
  const stream = scripted.messages.stream({ ...ask, tools, max_tokens: 100 });
  const streamed = await stream.finalMessage();
  check(streamed.stop_reason === 'tool_use' && streamed.content.length === 1 && streamed.content[0].type === 'tool_use' &&
    streamed.content[0].input.city === 'Paris', 'auto call streamed', streamed);
  const turn2 = await scripted.messages.create({
    model, tools, max_tokens: 60,
    messages: [
      { role: 'user', content: question },
      { role: 'assistant', content: turn1.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: u1.id, content: 'sunny, 21 C' }] },
    ],
  });
  check(turn2.stop_reason === 'end_turn' && turn2.content.length === 1 && turn2.content[0].type === 'text' &&
    turn2.content[0].text === 'It is sunny in Paris.', 'answer after the tool result', turn2);
  out.messages_answer = turn2.content[0].text;
}

async function responses(out) {
  const client = new OpenAI({ apiKey: 'unused', baseURL: process.env.LLMSERVE_URL + '/v1', maxRetries: 0 });
  const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city.', parameters: schema }];

  // input_tokens: the tool's description is in the prompt.
  const without = await client.responses.inputTokens.count({ model, input: question });
  const withTools = await client.responses.inputTokens.count({ model, input: question, tools });
  check(withTools.input_tokens >= without.input_tokens + descTokens, 'input_tokens with the tool', [withTools, without, descTokens]);
  out.responses_count = [without.input_tokens, withTools.input_tokens];

  // tool_choice required: the constrained answer is a function_call item
  // (greedy, as above).
  const call = await client.responses.create({
    model, input: question, tools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 120, temperature: 0,
  });
  const fc = call.output.find((o) => o.type === 'function_call');
  check(call.status === 'completed' && fc && fc.name === 'get_weather' && ['Paris', 'London'].includes(JSON.parse(fc.arguments).city),
    'function_call item', call.output);
  const counted = await client.responses.inputTokens.count({ model, input: question, tools, tool_choice: 'required', parallel_tool_calls: false });
  check(call.usage.input_tokens === counted.input_tokens, 'usage counts the tools', [call.usage, counted]);

  // auto, scripted: the call, then the answer to its output on the stored
  // conversation.
  const scripted = new OpenAI({ apiKey: 'unused', baseURL: process.env.LLMSERVE_SCRIPTED_URL + '/v1', maxRetries: 0 });
  const turn1 = await scripted.responses.create({ model, input: question, tools, max_output_tokens: 100 });
  const c1 = turn1.output.find((o) => o.type === 'function_call');
  check(turn1.output.length === 1 && c1 && c1.name === 'get_weather' && JSON.parse(c1.arguments).city === 'Paris', 'auto call', turn1.output);
  const events = [];
  let done;
  const stream = await scripted.responses.create({ model, input: question, tools, max_output_tokens: 100, stream: true });
  for await (const ev of stream) {
    events.push(ev.type);
    if (ev.type === 'response.completed') done = ev.response;
  }
  check(done && done.output.length === 1 && done.output[0].type === 'function_call' && JSON.parse(done.output[0].arguments).city === 'Paris',
    'auto call streamed', { events, done });
  const turn2 = await scripted.responses.create({
    model, tools, max_output_tokens: 60, previous_response_id: turn1.id,
    input: [{ type: 'function_call_output', call_id: c1.call_id, output: 'sunny, 21 C' }],
  });
  check(turn2.status === 'completed' && turn2.output_text === 'It is sunny in Paris.', 'answer after the function output', turn2.output);
  out.responses_answer = turn2.output_text;
}

async function main() {
  const out = {};
  await messages(out);
  await responses(out);
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
