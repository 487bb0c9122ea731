// Streams through an endpoint with the official Node SDKs and prints what
// they saw as one JSON object. internal/relay's TestNodeSDKs runs it against
// the gateway and against the simulator directly and compares the two.
//
//   node stream.mjs BASE_URL KEY
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [base, key] = process.argv.slice(2);
const out = {};

const openai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });
let text = '', chunks = 0, finish = null;
const chat = await openai.chat.completions.create({
  model: 'fast', stream: true, messages: [{ role: 'user', content: 'Say hello.' }],
});
for await (const chunk of chat) {
  chunks++;
  for (const c of chunk.choices) {
    text += c.delta?.content ?? '';
    finish = c.finish_reason ?? finish;
  }
}
out.chat = { text, chunks, finish };

let rtext = '', completed = false;
const resp = await openai.responses.create({ model: 'reasoning', stream: true, input: 'Say hello.' });
for await (const ev of resp) {
  if (ev.type === 'response.output_text.delta') rtext += ev.delta;
  if (ev.type === 'response.completed') completed = true;
}
out.responses = { text: rtext, completed };

const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const stream = anthropic.messages.stream({
  model: 'tool-call', max_tokens: 512, messages: [{ role: 'user', content: 'Say hello.' }],
});
const msg = await stream.finalMessage();
out.anthropic = { content: msg.content, stop_reason: msg.stop_reason, output_tokens: msg.usage.output_tokens };

try {
  const bad = new OpenAI({ baseURL: base + '/v1', apiKey: key + '-wrong', maxRetries: 0 });
  await bad.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x' }] });
  out.wrongKey = 'accepted';
} catch (e) {
  out.wrongKey = e.status ?? String(e);
}

console.log(JSON.stringify(out));
