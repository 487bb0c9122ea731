// Streams from an Azure OpenAI endpoint with the openai package's
// AzureOpenAI client (deployment URLs, api-version, api-key) and prints
// what it saw as one JSON object: a streamed answer, a streamed tool call,
// a non-streaming answer, and the error a wrong key gets. internal/relay's
// TestNodeAzureSDK runs it against the simulator's Azure side.
//
//   node azure.mjs ENDPOINT KEY
import { AzureOpenAI } from 'openai';

const [endpoint, key] = process.argv.slice(2);
const client = new AzureOpenAI({ endpoint, apiKey: key, apiVersion: '2024-10-21', maxRetries: 0 });
const out = {};

async function stream(deployment) {
  let text = '', tool = '', finish = null;
  const s = await client.chat.completions.create({
    model: deployment, stream: true, messages: [{ role: 'user', content: 'Say hello.' }],
  });
  for await (const chunk of s) {
    const c = chunk.choices?.[0];
    if (!c) continue;
    text += c.delta?.content ?? '';
    tool += c.delta?.tool_calls?.[0]?.function?.arguments ?? '';
    finish = c.finish_reason ?? finish;
  }
  return { text, tool, finish };
}

out.stream = await stream('fast');
out.tool = await stream('tool-call');
const r = await client.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'Say hello.' }] });
out.plain = { text: r.choices[0].message.content, finish: r.choices[0].finish_reason };
try {
  const bad = new AzureOpenAI({ endpoint, apiKey: 'wrong', apiVersion: '2024-10-21', maxRetries: 0 });
  await bad.chat.completions.create({ model: 'fast', messages: [{ role: 'user', content: 'x' }] });
  out.wrongKey = null;
} catch (e) {
  out.wrongKey = { status: e.status ?? null, message: String(e.message).slice(0, 200) };
}
console.log(JSON.stringify(out));
