// Calls Bedrock's runtime API with the official Node clients and prints what
// they saw as one JSON object. internal/relay's TestNodeBedrockSDKs runs it
// twice:
//
//   node bedrock.mjs direct SIM_URL     the simulator's Bedrock side, SigV4
//                                       with the simulator's credentials
//   node bedrock.mjs gateway GW_URL KEY the gateway (HTTPS) with the ttfx key
//                                       as a Bedrock API key (bearer) and an
//                                       endpoint override
//
// both: @aws-sdk/client-bedrock-runtime (ConverseStream, Converse,
// InvokeModelWithResponseStream, InvokeModel; 429, 500, cut stream).
// direct: @anthropic-ai/bedrock-sdk (stream, plain, tool use, 429) and
// @ai-sdk/amazon-bedrock (stream, plain).
// gateway: @ai-sdk/amazon-bedrock with apiKey, and @anthropic-ai/sdk to a
// bedrock channel.
import { BedrockRuntimeClient, ConverseStreamCommand, ConverseCommand, InvokeModelCommand, InvokeModelWithResponseStreamCommand } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { AnthropicBedrock } from '@anthropic-ai/bedrock-sdk';
import Anthropic from '@anthropic-ai/sdk';
import { createAmazonBedrock } from '@ai-sdk/amazon-bedrock';
import { streamText, generateText } from 'ai';

globalThis.AI_SDK_LOG_WARNINGS = false;

const [mode, url, key] = process.argv.slice(2);
const region = 'us-east-1';
const creds = { accessKeyId: 'AKIASIMULATOR0000000', secretAccessKey: 'ttfx-simulator-secret-access-key' };
const out = { mode };
const err = (e) => ({ name: e?.name ?? null, status: e?.$metadata?.httpStatusCode ?? e?.status ?? e?.statusCode ?? null, message: String(e?.message ?? e).slice(0, 200) });

// @aws-sdk/client-bedrock-runtime, HTTP/1.1 (its default handler is HTTP/2).
const aws = new BedrockRuntimeClient(mode === 'direct'
  ? { region, endpoint: url, credentials: creds, maxAttempts: 1, requestHandler: new NodeHttpHandler() }
  : { region, endpoint: url, token: { token: key }, authSchemePreference: ['httpBearerAuth'], maxAttempts: 1, requestHandler: new NodeHttpHandler() });
const messages = [{ role: 'user', content: [{ text: 'Say hello.' }] }];
async function converseStream(modelId) {
  let text = '', tool = '', stop = null, latencyMs = null, outputTokens = null;
  try {
    const r = await aws.send(new ConverseStreamCommand({ modelId, messages }));
    for await (const ev of r.stream) {
      if (ev.contentBlockDelta?.delta?.text) text += ev.contentBlockDelta.delta.text;
      if (ev.contentBlockDelta?.delta?.toolUse) tool += ev.contentBlockDelta.delta.toolUse.input ?? '';
      if (ev.messageStop) stop = ev.messageStop.stopReason;
      if (ev.metadata) { latencyMs = ev.metadata.metrics?.latencyMs ?? null; outputTokens = ev.metadata.usage?.outputTokens ?? null; }
    }
    return { text, tool, stop, latencyMs, outputTokens, error: null };
  } catch (e) {
    return { text, tool, stop, latencyMs, outputTokens, error: err(e) };
  }
}
out.converseStream = await converseStream('fast');
out.converseTool = await converseStream('tool-call');
out.converse429 = await converseStream('status-429');
out.converse500 = await converseStream('status-500');
out.converseCut = await converseStream('flaky');
try {
  const r = await aws.send(new ConverseCommand({ modelId: 'fast', messages }));
  out.conversePlain = { text: r.output?.message?.content?.[0]?.text ?? '', stop: r.stopReason, error: null };
} catch (e) {
  out.conversePlain = { error: err(e) };
}

const anthropicBody = (stream) => JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] });
const msg = (model) => ({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] });
async function anthropicStream(client, model) {
  let text = '', tool = '', stop = null;
  try {
    const s = await client.messages.create({ ...msg(model), stream: true });
    for await (const e of s) {
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') tool += e.delta.partial_json;
      if (e.type === 'message_delta') stop = e.delta.stop_reason ?? stop;
    }
    return { text, tool, stop, error: null };
  } catch (e) {
    return { text, tool, stop, error: err(e) };
  }
}
async function aiStream(model) {
  const r = streamText({ model, prompt: 'Say hello.', maxRetries: 0, onError: () => {} });
  let text = '', finish = null, error = null;
  for await (const part of r.fullStream) {
    if (part.type === 'text-delta') text += part.text;
    if (part.type === 'finish') finish = part.finishReason;
    if (part.type === 'error') error = String(part.error?.message ?? part.error).slice(0, 200);
  }
  return { text, finish, error };
}

// InvokeModelWithResponseStream: chunks carrying Anthropic's events; the
// time of the first text from just before the call, by the client's clock.
async function invokeStream(modelId) {
  let text = '', types = [], stop = null, outputTokens = null, latencyMs = null, firstTextMs = null;
  const start = performance.now();
  try {
    const r = await aws.send(new InvokeModelWithResponseStreamCommand({ modelId, contentType: 'application/json', body: anthropicBody(true) }));
    for await (const ev of r.body) {
      if (!ev.chunk) continue;
      const e = JSON.parse(Buffer.from(ev.chunk.bytes).toString('utf8'));
      types.push(e.type);
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') {
        if (firstTextMs === null) firstTextMs = performance.now() - start;
        text += e.delta.text;
      }
      if (e.type === 'message_delta') { stop = e.delta.stop_reason ?? stop; outputTokens = e.usage?.output_tokens ?? outputTokens; }
      if (e.type === 'message_stop') latencyMs = e['amazon-bedrock-invocationMetrics']?.invocationLatency ?? null;
    }
    return { text, stop, outputTokens, latencyMs, firstTextMs, first: types[0] ?? null, last: types.at(-1) ?? null, error: null };
  } catch (e) {
    return { text, stop, firstTextMs, first: types[0] ?? null, last: types.at(-1) ?? null, error: err(e) };
  }
}
out.invokeStream = await invokeStream('fast');
out.invoke429 = await invokeStream('status-429');
out.invokeCut = await invokeStream('flaky');
try {
  const r = await aws.send(new InvokeModelCommand({ modelId: 'fast', contentType: 'application/json', body: anthropicBody(false) }));
  const m = JSON.parse(Buffer.from(r.body).toString('utf8'));
  out.invokePlain = { text: m.content?.[0]?.text ?? '', stop: m.stop_reason, outputTokens: m.usage?.output_tokens ?? null, error: null };
} catch (e) {
  out.invokePlain = { error: err(e) };
}

if (mode === 'direct') {
  // @anthropic-ai/bedrock-sdk, SigV4. This version moves its anthropic-version
  // header (the Messages API's date) into the body, where Bedrock wants
  // bedrock-2023-05-31 (the simulator refuses another, as Bedrock does):
  // the header is set to Bedrock's.
  const ab = new AnthropicBedrock({ awsRegion: region, awsAccessKey: creds.accessKeyId, awsSecretKey: creds.secretAccessKey, baseURL: url, maxRetries: 0,
    defaultHeaders: { 'anthropic-version': 'bedrock-2023-05-31' } });
  out.anthropicStream = await anthropicStream(ab, 'fast');
  out.anthropicTool = await anthropicStream(ab, 'tool-call');
  out.anthropic429 = await anthropicStream(ab, 'status-429');
  try {
    const m = await ab.messages.create(msg('fast'));
    out.anthropicPlain = { text: m.content[0]?.text ?? '', stop: m.stop_reason, error: null };
  } catch (e) {
    out.anthropicPlain = { error: err(e) };
  }
  // @ai-sdk/amazon-bedrock, SigV4.
  const bedrock = createAmazonBedrock({ region, baseURL: url, ...creds });
  out.aiStream = await aiStream(bedrock('fast'));
  try {
    const g = await generateText({ model: bedrock('fast'), prompt: 'Say hello.', maxRetries: 0 });
    out.aiPlain = { text: g.text, finish: g.finishReason, error: null };
  } catch (e) {
    out.aiPlain = { error: err(e) };
  }
} else {
  // @ai-sdk/amazon-bedrock with the ttfx key as its Bedrock API key.
  const bedrock = createAmazonBedrock({ region, baseURL: url, apiKey: key });
  out.aiStream = await aiStream(bedrock('fast'));
  out.ai429 = await aiStream(bedrock('status-429'));
  // @anthropic-ai/sdk to the gateway's bedrock channel.
  const a = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
  out.anthropicStream = await anthropicStream(a, 'fast');
  out.anthropicTool = await anthropicStream(a, 'tool-call');
  out.anthropic429 = await anthropicStream(a, 'status-429');
  out.anthropicCut = await anthropicStream(a, 'flaky');
}
console.log(JSON.stringify(out));
