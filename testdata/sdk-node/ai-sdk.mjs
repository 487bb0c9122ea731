// Streams through an endpoint with the Vercel AI SDK (ai with
// @ai-sdk/openai, @ai-sdk/anthropic, @ai-sdk/google) and Google's
// @google/genai, and prints what they saw as one JSON object: for each
// provider a healthy stream (text, finish reason, usage) and a stream whose
// upstream fails mid-answer (model `flaky`: the error the client got).
// internal/relay's TestNodeAISDKs runs it against the gateway and against
// the simulator directly.
//
//   node ai-sdk.mjs BASE_URL KEY
import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { GoogleGenAI } from '@google/genai';

globalThis.AI_SDK_LOG_WARNINGS = false; // they go to stdout, where the result goes

const [base, key] = process.argv.slice(2);
const out = {};

const openai = createOpenAI({ baseURL: base + '/v1', apiKey: key });
const anthropic = createAnthropic({ baseURL: base + '/v1', apiKey: key });
const google = createGoogleGenerativeAI({ baseURL: base + '/v1beta', apiKey: key });

// stream runs one streamText call to the end and reports what the
// application sees: the text, the finish reason, the usage, every error
// part (an error the stream reported), and what was thrown (a broken
// connection).
async function stream(model) {
  const errors = [];
  const r = streamText({ model, prompt: 'Say hello.', maxRetries: 0, onError: () => {} });
  let text = '', finish = null, usage = null, thrown = null;
  try {
    for await (const part of r.fullStream) {
      if (part.type === 'text-delta') text += part.text;
      if (part.type === 'finish') { finish = part.finishReason; usage = part.totalUsage?.outputTokens ?? null; }
      if (part.type === 'error') errors.push(describe(part.error));
    }
  } catch (e) {
    thrown = describe(e); // a broken connection, not an error the stream reported
  }
  return { text, finish, usage, errors, thrown };
}

function describe(e) {
  return { name: e?.name ?? null, status: e?.statusCode ?? e?.status ?? null, message: String(e?.message ?? e).slice(0, 300) };
}

const models = {
  chat: [openai.chat('fast'), openai.chat('flaky')],
  responses: [openai.responses('reasoning'), openai.responses('flaky')],
  anthropic: [anthropic('tool-call'), anthropic('flaky')],
  google: [google('fast'), google('flaky')],
};
for (const [name, [ok, flaky]] of Object.entries(models)) {
  out[name] = await stream(ok);
  out[name + 'Flaky'] = await stream(flaky);
}

const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });
// The v1 paths (/v1/models/{m}:streamGenerateContent), which
// google.golang.org/genai calls with its default settings.
const genaiV1 = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base, apiVersion: 'v1' } });
async function genaiStream(model, client = genai) {
  let text = '', finish = null, error = null;
  try {
    const s = await client.models.generateContentStream({ model, contents: 'Say hello.' });
    for await (const chunk of s) {
      text += chunk.text ?? '';
      finish = chunk.candidates?.[0]?.finishReason ?? finish;
    }
  } catch (e) {
    error = describe(e);
  }
  return { text, finish, error };
}
out.genai = await genaiStream('fast');
out.genaiFlaky = await genaiStream('flaky');
out.genaiV1 = await genaiStream('fast', genaiV1);

console.log(JSON.stringify(out));
