// Calls a gateway with a key that is over its limit through the official
// SDKs and prints, for each, the error class it raised, its status, the
// retry-after it saw and its message. internal/relay's
// TestAdmissionSDKErrors runs it.
//
//   node ratelimit.mjs BASE_URL KEY
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';

const [base, key] = process.argv.slice(2);
const out = {};

function seen(e) {
  const h = e.headers;
  const get = (k) => (h && typeof h.get === 'function' ? h.get(k) : h?.[k]) ?? '';
  return { class: e.constructor?.name ?? typeof e, status: e.status ?? 0, retryAfter: get('retry-after'), message: String(e.message ?? e) };
}

try {
  const openai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });
  await openai.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x' }] });
  out.openai = { class: 'none' };
} catch (e) {
  out.openai = seen(e);
  if (!(e instanceof OpenAI.RateLimitError)) out.openai.class += ' (not OpenAI.RateLimitError)';
}

try {
  const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
  await anthropic.messages.create({ model: 'fast', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] });
  out.anthropic = { class: 'none' };
} catch (e) {
  out.anthropic = seen(e);
  if (!(e instanceof Anthropic.RateLimitError)) out.anthropic.class += ' (not Anthropic.RateLimitError)';
}

try {
  const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base, retryOptions: { attempts: 1 } } });
  await genai.models.generateContent({ model: 'fast', contents: 'x' });
  out.genai = { class: 'none' };
} catch (e) {
  out.genai = seen(e);
}

console.log(JSON.stringify(out));
