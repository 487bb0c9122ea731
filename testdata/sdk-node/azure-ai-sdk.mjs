// Azure OpenAI's official Node clients — the Vercel AI SDK's @ai-sdk/azure
// and the openai package's AzureOpenAI — against an Azure endpoint, and
// prints what they saw as one JSON object: a streamed answer, a streamed
// tool call, a plain answer, a Responses stream, and the errors of a 429,
// a 500 and a stream cut mid-answer. internal/relay's TestNodeAzureClients
// runs it against the simulator's Azure side (MODE direct: @ai-sdk/azure
// with deployment URLs and api-version, and in the v1 form) and against
// the gateway (MODE gateway: the same clients with their base URL set to
// the gateway's /v1 and their api-key header carrying the ttfx key).
//
//   node azure-ai-sdk.mjs MODE URL KEY
import { generateText, streamText, tool, jsonSchema } from 'ai';
import { createAzure } from '@ai-sdk/azure';
import { AzureOpenAI } from 'openai';

globalThis.AI_SDK_LOG_WARNINGS = false; // they go to stdout, where the result goes

const [mode, url, key] = process.argv.slice(2);
const apiVersion = '2024-10-21';
// direct: deployment URLs (/openai/deployments/{m}/chat/completions?api-version=…)
// for chat, the v1 form (/openai/v1/responses) for Responses. gateway: the
// gateway's OpenAI paths, the key in api-key as Azure's clients send it.
const chatProvider = mode === 'direct'
  ? createAzure({ baseURL: url + '/openai', apiKey: key, useDeploymentBasedUrls: true, apiVersion })
  : createAzure({ baseURL: url + '/v1', apiKey: key });
const v1Provider = createAzure({ baseURL: url + (mode === 'direct' ? '/openai/v1' : '/v1'), apiKey: key });
const out = {};

function describe(e) {
  return { name: e?.name ?? null, status: e?.statusCode ?? e?.status ?? null, message: String(e?.message ?? e).slice(0, 300) };
}

const weather = tool({
  description: 'Get the weather of a city.',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] }),
});

async function stream(model, tools) {
  const errors = [];
  const r = streamText({ model, prompt: 'Say hello.', tools, maxRetries: 0, onError: () => {} });
  let text = '', finish = null, usage = null, thrown = null, toolName = null, toolInput = null;
  try {
    for await (const part of r.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'tool-call') { toolName = part.toolName; toolInput = part.input; }
      if (part.type === 'finish') { finish = part.finishReason; usage = part.totalUsage?.outputTokens ?? null; }
      if (part.type === 'error') errors.push(describe(part.error));
    }
  } catch (e) {
    thrown = describe(e);
  }
  return { text, finish, usage, toolName, toolInput, errors, thrown };
}

async function plain(model) {
  try {
    const r = await generateText({ model, prompt: 'Say hello.', maxRetries: 0 });
    return { text: r.text, finish: r.finishReason, error: null };
  } catch (e) {
    return { text: null, finish: null, error: describe(e) };
  }
}

out.aiStream = await stream(chatProvider.chat('fast'));
out.aiTool = await stream(chatProvider.chat('tool-call'), { get_weather: weather });
out.aiPlain = await plain(chatProvider.chat('fast'));
out.aiResponses = await stream(v1Provider.responses('fast'));
out.ai429 = await plain(chatProvider.chat('status-429'));
out.ai500 = await plain(chatProvider.chat('status-500'));
out.aiFlaky = await stream(chatProvider.chat('flaky'));

// AzureOpenAI: directly with its endpoint (deployment URLs for chat); to
// the gateway through Responses, whose path (/responses?api-version=…) it
// does not move under a deployment.
const az = mode === 'direct'
  ? new AzureOpenAI({ endpoint: url, apiKey: key, apiVersion, maxRetries: 0 })
  : new AzureOpenAI({ baseURL: url + '/v1', apiKey: key, apiVersion, maxRetries: 0 });
async function responses(model, tools) {
  let text = '', status = null, call = null, error = null;
  try {
    const s = await az.responses.create({ model, input: 'Say hello.', stream: true, tools });
    for await (const ev of s) {
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.output_item.done' && ev.item?.type === 'function_call') call = { name: ev.item.name, arguments: ev.item.arguments };
      if (ev.type === 'response.completed') status = ev.response.status;
    }
  } catch (e) {
    error = describe(e);
  }
  return { text, status, call, error };
}
const fnTool = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
out.azResponses = await responses('fast');
out.azTool = await responses('tool-call', fnTool);
out.azFlaky = await responses('flaky');
try {
  await az.responses.create({ model: 'status-429', input: 'x' });
  out.az429 = null;
} catch (e) {
  out.az429 = describe(e);
}
try {
  await az.responses.create({ model: 'status-500', input: 'x' });
  out.az500 = null;
} catch (e) {
  out.az500 = describe(e);
}
console.log(JSON.stringify(out));
