// Azure OpenAI's official Node clients — the Vercel AI SDK's @ai-sdk/azure
// and the openai package's AzureOpenAI — against an Azure endpoint, and
// prints what they saw as one JSON object: streamed answers, streamed tool
// calls, plain answers, legacy completions, embeddings, Responses, and the
// errors of a 429, a 500 and a stream cut mid-answer. internal/relay's
// TestNodeAzureClients runs it against the simulator's Azure side (MODE
// direct) and against the gateway (MODE gateway), configured the same way
// both times: the endpoint is all that changes (and the key, which the
// clients send in api-key). @ai-sdk/azure uses deployment URLs with
// api-version for chat, completions and embeddings and the v1 form for
// Responses; AzureOpenAI its deployment URLs and /openai/responses.
//
//   node azure-ai-sdk.mjs MODE URL KEY
import { generateText, streamText, embed, tool, jsonSchema } from 'ai';
import { createAzure } from '@ai-sdk/azure';
import { AzureOpenAI } from 'openai';

globalThis.AI_SDK_LOG_WARNINGS = false; // they go to stdout, where the result goes

const [, url, key] = process.argv.slice(2); // MODE only names the run
const apiVersion = '2024-10-21';
const chatProvider = createAzure({ baseURL: url + '/openai', apiKey: key, useDeploymentBasedUrls: true, apiVersion });
const v1Provider = createAzure({ baseURL: url + '/openai/v1', apiKey: key });
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
out.aiCompletion = await plain(chatProvider.completion('fast'));
try {
  const e = await embed({ model: chatProvider.embedding('fast'), value: 'hello', maxRetries: 0 });
  out.aiEmbed = { dims: e.embedding.length, error: null };
} catch (e) {
  out.aiEmbed = { dims: 0, error: describe(e) };
}

// AzureOpenAI with its endpoint: chat, completions and embeddings go to
// /openai/deployments/{model}/…?api-version=…, Responses to
// /openai/responses?api-version=….
const az = new AzureOpenAI({ endpoint: url, apiKey: key, apiVersion, maxRetries: 0 });
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

async function chat(model, tools) {
  let text = '', tool = '', toolName = null, finish = null, error = null;
  try {
    const s = await az.chat.completions.create({ model, stream: true, tools, messages: [{ role: 'user', content: 'Say hello.' }] });
    for await (const chunk of s) {
      const c = chunk.choices?.[0];
      if (!c) continue; // Azure's content-filter chunks have no choices
      text += c.delta?.content ?? '';
      toolName = c.delta?.tool_calls?.[0]?.function?.name ?? toolName;
      tool += c.delta?.tool_calls?.[0]?.function?.arguments ?? '';
      finish = c.finish_reason ?? finish;
    }
  } catch (e) {
    error = describe(e);
  }
  return { text, toolName, tool, finish, error };
}
const chatTool = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
out.azChat = await chat('fast');
out.azChatTool = await chat('tool-call', chatTool);
out.azChatFlaky = await chat('flaky');
const plainChat = await az.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'Say hello.' }] });
out.azChatPlain = { text: plainChat.choices[0].message.content, finish: plainChat.choices[0].finish_reason };
for (const [name, model] of [['azChat429', 'status-429'], ['azChat500', 'status-500']]) {
  try {
    await az.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] });
    out[name] = null;
  } catch (e) {
    out[name] = describe(e);
  }
}
const comp = await az.completions.create({ model: 'fast', prompt: 'Say hello.' });
out.azCompletion = { text: comp.choices[0].text, finish: comp.choices[0].finish_reason };
let compText = '';
for await (const chunk of await az.completions.create({ model: 'fast', prompt: 'Say hello.', stream: true })) {
  compText += chunk.choices?.[0]?.text ?? '';
}
out.azCompletionStream = { text: compText };
const emb = await az.embeddings.create({ model: 'fast', input: ['hello', 'world'] });
out.azEmbed = { n: emb.data.length, dims: emb.data[0].embedding.length };
console.log(JSON.stringify(out));
