// Calls the simulator's Vertex AI side with the Vertex SDKs, each signing
// in as a test service account through google-auth-library (the JWT-bearer
// grant, the JWT signed with the account's key and verified by the
// simulator), and prints what they saw as one JSON object:
// @anthropic-ai/vertex-sdk (a streamed answer, a streamed tool call, a
// plain answer, a 429) and @ai-sdk/google-vertex for Gemini and Anthropic
// models (streamed and plain). internal/relay's TestNodeVertexSDKs runs it.
//
//   node vertex.mjs SIM_URL KEY_FILE
//
// google-auth-library sends the token request to Google's fixed token URL
// (https://oauth2.googleapis.com/token, also the JWT's audience); the fetch
// below sends that one URL to the simulator instead, as a resolver entry
// would, and leaves every other request alone.
import { readFileSync } from 'node:fs';
import { GoogleAuth } from 'google-auth-library';
import { AnthropicVertex } from '@anthropic-ai/vertex-sdk';
import { createVertex } from '@ai-sdk/google-vertex';
import { createVertexAnthropic } from '@ai-sdk/google-vertex/anthropic';
import { streamText, generateText } from 'ai';

globalThis.AI_SDK_LOG_WARNINGS = false;

const [sim, keyFile] = process.argv.slice(2);
const credentials = JSON.parse(readFileSync(keyFile, 'utf8'));
const project = credentials.project_id, region = 'us-east5';
let tokenRequests = 0;
const fetchImplementation = (url, init) => {
  if (String(url) === 'https://oauth2.googleapis.com/token') {
    tokenRequests++;
    url = sim + '/token';
  }
  return fetch(url, init);
};
const googleAuthOptions = {
  credentials, scopes: 'https://www.googleapis.com/auth/cloud-platform',
  clientOptions: { transporterOptions: { fetchImplementation } },
};
const out = { tokenRequests: 0 };

// @anthropic-ai/vertex-sdk.
const client = new AnthropicVertex({ region, projectId: project, baseURL: sim + '/v1', googleAuth: new GoogleAuth(googleAuthOptions), maxRetries: 0 });
const msg = (model) => ({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] });
async function stream(model) {
  let text = '', tool = '', stop = null;
  const s = await client.messages.create({ ...msg(model), stream: true });
  for await (const e of s) {
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') tool += e.delta.partial_json;
    if (e.type === 'message_delta') stop = e.delta.stop_reason ?? stop;
  }
  return { text, tool, stop };
}
out.anthropicStream = await stream('fast');
out.anthropicTool = await stream('tool-call');
const m = await client.messages.create(msg('fast'));
out.anthropicPlain = { text: m.content[0]?.text ?? '', stop: m.stop_reason };
try {
  await client.messages.create(msg('status-429'));
  out.anthropic429 = null;
} catch (e) {
  out.anthropic429 = { status: e.status ?? null };
}

// @ai-sdk/google-vertex: Gemini models and Anthropic models.
const vertex = createVertex({ project, location: region, baseURL: `${sim}/v1beta1/projects/${project}/locations/${region}/publishers/google`, googleAuthOptions });
const vanthropic = createVertexAnthropic({ project, location: region, baseURL: `${sim}/v1/projects/${project}/locations/${region}/publishers/anthropic/models`, googleAuthOptions });
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
out.geminiStream = await aiStream(vertex('fast'));
const g = await generateText({ model: vertex('fast'), prompt: 'Say hello.', maxRetries: 0 });
out.geminiPlain = { text: g.text, finish: g.finishReason };
out.aiAnthropicStream = await aiStream(vanthropic('fast'));
out.tokenRequests = tokenRequests;
console.log(JSON.stringify(out));
