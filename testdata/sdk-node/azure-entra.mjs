// The openai package's AzureOpenAI client authenticating with Microsoft
// Entra ID: its azureADTokenProvider option, whose tokens it sends as
// Authorization: Bearer. Prints what it saw as one JSON object: a chat
// stream, a streamed tool call, a plain answer, a Responses stream,
// embeddings, and the error a token the resource does not know gets.
// internal/relay's TestNodeAzureEntraID runs it against the simulator's
// Azure side with tokens from the simulator's Entra ID endpoint (MODE
// entra: the client-credentials grant, the token cached until near its
// expiry as @azure/identity does), and against the gateway (MODE bearer:
// the ttfx key is the bearer token) whose channel gets its own tokens.
//
//   node azure-entra.mjs entra ENDPOINT AUTHORITY TENANT CLIENT_ID SECRET
//   node azure-entra.mjs bearer ENDPOINT KEY
import { AzureOpenAI } from 'openai';

const [mode, endpoint, ...rest] = process.argv.slice(2);
const apiVersion = '2024-10-21';
const out = { fetches: 0 };

let tokenProvider;
if (mode === 'entra') {
  const [authority, tenant, clientId, secret] = rest;
  let cached = null, until = 0;
  tokenProvider = async () => {
    if (cached && Date.now() < until) return cached;
    const r = await fetch(`${authority}/${tenant}/oauth2/v2.0/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret,
        scope: 'https://cognitiveservices.azure.com/.default' }),
    });
    const j = await r.json();
    if (!r.ok) throw new Error(`token endpoint ${r.status}: ${j.error_description ?? j.error}`);
    out.fetches++;
    cached = j.access_token;
    until = Date.now() + (j.expires_in * 1000) * 0.8;
    return cached;
  };
} else {
  const [key] = rest;
  tokenProvider = async () => key;
}

function describe(e) {
  return { name: e?.name ?? null, status: e?.status ?? null, message: String(e?.message ?? e).slice(0, 300) };
}

const az = new AzureOpenAI({ endpoint, azureADTokenProvider: tokenProvider, apiVersion, maxRetries: 0 });

async function chat(model, tools) {
  let text = '', tool = '', toolName = null, finish = null, error = null;
  try {
    const s = await az.chat.completions.create({ model, stream: true, tools, messages: [{ role: 'user', content: 'Say hello.' }] });
    for await (const chunk of s) {
      const c = chunk.choices?.[0];
      if (!c) continue;
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

out.chat = await chat('fast');
out.tool = await chat('tool-call', [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]);
const plain = await az.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'Say hello.' }] });
out.plain = { text: plain.choices[0].message.content, finish: plain.choices[0].finish_reason };
let rtext = '', rstatus = null;
for await (const ev of await az.responses.create({ model: 'fast', input: 'Say hello.', stream: true })) {
  if (ev.type === 'response.output_text.delta') rtext += ev.delta;
  if (ev.type === 'response.completed') rstatus = ev.response.status;
}
out.responses = { text: rtext, status: rstatus };
const emb = await az.embeddings.create({ model: 'fast', input: 'hello' });
out.embed = { n: emb.data.length, dims: emb.data[0].embedding.length };
try {
  const bad = new AzureOpenAI({ endpoint, azureADTokenProvider: async () => 'not-a-token', apiVersion, maxRetries: 0 });
  await bad.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x' }] });
  out.wrongToken = null;
} catch (e) {
  out.wrongToken = describe(e);
}
console.log(JSON.stringify(out));
