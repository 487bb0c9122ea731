// Streams the given cases through an endpoint with official Node clients and
// prints, for each, what the client saw: the text it got and the error it
// raised (null when the stream ended as a clean answer). internal/relay's
// TestClientHangUpAfterTerminal and TestMidStreamFailureRaises run it.
//
//   node edges.mjs BASE_URL KEY CASES_JSON
//
// CASES_JSON is a list of {"name", "client", "model", "stopOnError"}:
// client is one of openai-chat, openai-responses (the raw event iteration),
// langchain-responses (ChatOpenAI with useResponsesApi), anthropic, genai.
// stopOnError makes a client that yields an error event as an ordinary one
// stop there (breaking out aborts the request, as an application does).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { ChatOpenAI } from '@langchain/openai';

const [base, key, casesJSON] = process.argv.slice(2);
const cases = JSON.parse(casesJSON);

const openai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const genai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } });

async function run(c) {
  let text = '';
  try {
    switch (c.client) {
      case 'openai-chat': {
        const s = await openai.chat.completions.create({
          model: c.model, stream: true, messages: [{ role: 'user', content: 'Say hello.' }],
        });
        for await (const chunk of s) {
          for (const ch of chunk.choices ?? []) text += ch.delta?.content ?? '';
        }
        break;
      }
      case 'openai-responses': {
        const s = await openai.responses.create({ model: c.model, stream: true, input: 'Say hello.' });
        for await (const ev of s) {
          if (ev.type === 'response.output_text.delta') text += ev.delta;
          if (c.stopOnError && (ev.type === 'error' || ev.type === 'response.failed')) {
            return { text, error: 'error event: ' + (ev.message ?? ev.response?.error?.message) };
          }
        }
        break;
      }
      case 'langchain-responses': {
        const llm = new ChatOpenAI({
          model: c.model, apiKey: key, maxRetries: 0, useResponsesApi: true,
          configuration: { baseURL: base + '/v1' },
        });
        for await (const chunk of await llm.stream('Say hello.')) {
          text += typeof chunk.content === 'string' ? chunk.content : (chunk.text ?? '');
        }
        break;
      }
      case 'anthropic': {
        const s = anthropic.messages.stream({
          model: c.model, max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }],
        });
        s.on('text', (t) => { text += t; });
        await s.finalMessage();
        break;
      }
      case 'genai': {
        const s = await genai.models.generateContentStream({ model: c.model, contents: 'Say hello.' });
        for await (const chunk of s) text += chunk.text ?? '';
        break;
      }
      default:
        throw new Error('unknown client ' + c.client);
    }
  } catch (e) {
    return { text, error: String(e?.message ?? e).slice(0, 200) || e?.name || 'error' };
  }
  return { text, error: null };
}

const out = {};
for (const c of cases) out[c.name] = await run(c);
console.log(JSON.stringify(out));
