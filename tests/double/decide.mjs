// A model that decides from the request it gets, in each provider kind's own wire shape (the
// event and field sets of the recorded transcripts in ../shared/wire): offered `read_file` and no
// tool result yet, it calls it on the first `.txt` file of the prompt's file tree (in the system
// prompt, or in a message of its own where seed 002's stability tiers put it); after a
// result, it answers with that result; offered no tool, it says so. The page's agent tests use it to
// make a whole tool round trip through the real `palaver serve` for every provider kind.

const SSE_EVENT = (type, data) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
const DATA = (data) => `data: ${JSON.stringify(data)}\n\n`;

/** Every string in a value, in order (the texts of a request's messages, whatever its shape). */
function texts(value) {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(texts);
  if (value && typeof value === 'object') return Object.values(value).flatMap(texts);
  return [];
}

/** What the request says, read in the kind's own shape; `prompt`: all its text. */
export function readRequest(kind, body) {
  const read = readShape(kind, body);
  return { ...read, prompt: [read.system, ...texts(body?.messages ?? body?.contents ?? body?.input ?? [])].join('\n') };
}

function readShape(kind, body) {
  switch (kind) {
    case 'anthropic': {
      const system = Array.isArray(body?.system) ? body.system.map((b) => b.text ?? '').join('') : String(body?.system ?? '');
      const last = body?.messages?.at(-1);
      const result = Array.isArray(last?.content) ? last.content.find((b) => b.type === 'tool_result') : null;
      const resultText = Array.isArray(result?.content) ? result.content.map((b) => b.text ?? '').join('') : result?.content;
      return { tools: (body?.tools ?? []).map((t) => t.name), system, result: result ? String(resultText ?? '') : null };
    }
    case 'gemini': {
      const declarations = (body?.tools ?? []).flatMap((t) => t.functionDeclarations ?? []);
      const last = body?.contents?.at(-1);
      const response = last?.parts?.find((p) => p.functionResponse)?.functionResponse;
      return {
        tools: declarations.map((d) => d.name),
        system: (body?.systemInstruction?.parts ?? []).map((p) => p.text ?? '').join(''),
        result: response ? (typeof response.response?.content === 'string' ? response.response.content : JSON.stringify(response.response)) : null,
      };
    }
    case 'openai-responses': {
      const last = body?.input?.at?.(-1);
      return {
        tools: (body?.tools ?? []).map((t) => t.name),
        system: String(body?.instructions ?? ''),
        result: last?.type === 'function_call_output' ? String(last.output ?? '') : null,
      };
    }
    default: {
      const messages = body?.messages ?? [];
      const lastUser = messages.map((m) => m.role).lastIndexOf('user');
      const result = messages.slice(lastUser + 1).filter((m) => m.role === 'tool').at(-1);
      return {
        tools: (body?.tools ?? []).map((t) => t.function?.name),
        system: String(messages.find((m) => m.role === 'system')?.content ?? ''),
        result: result ? String(result.content) : null,
      };
    }
  }
}

/** The decision: `{text}` or `{call: {name, args}}`. */
export function decision(request) {
  if (request.result !== null) return { text: `The file says: ${request.result.slice(0, 200)}` };
  if (!request.tools.includes('read_file')) return { text: 'I have no tools to look at your files.' };
  const tree = request.prompt.split('# File Tree')[1] ?? '';
  const file = tree.split('\n').map((l) => l.trim()).find((l) => l.endsWith('.txt')) ?? 'missing.txt';
  return { call: { name: 'read_file', args: { path: file } } };
}

/** The SSE body answering `body` for `kind`; `n` makes ids unique. */
export function decide(kind, body, n) {
  const made = decision(readRequest(kind, body));
  return (EMIT[kind] ?? EMIT['openai-chat'])(made, n);
}

const EMIT = {
  'openai-chat'(made, n) {
    const chunk = (delta, finish = null) => DATA({ id: `chatcmpl-decide-${n}`, object: 'chat.completion.chunk', created: 1_700_000_000, model: 'decider', choices: [{ index: 0, delta, finish_reason: finish }] });
    const usage = DATA({ id: `chatcmpl-decide-${n}`, object: 'chat.completion.chunk', created: 1_700_000_000, model: 'decider', choices: [], usage: { prompt_tokens: 50, completion_tokens: 5, total_tokens: 55 } });
    if (made.text) return chunk({ role: 'assistant', content: made.text }) + chunk({}, 'stop') + usage + 'data: [DONE]\n\n';
    const call = { index: 0, id: `call_decide_${n}`, type: 'function', function: { name: made.call.name, arguments: JSON.stringify(made.call.args) } };
    return chunk({ role: 'assistant', tool_calls: [call] }) + chunk({}, 'tool_calls') + usage + 'data: [DONE]\n\n';
  },
  anthropic(made, n) {
    let out = SSE_EVENT('message_start', { type: 'message_start', message: { id: `msg_decide_${n}`, type: 'message', role: 'assistant', model: 'claude-decider', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } });
    if (made.text) {
      out += SSE_EVENT('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
      out += SSE_EVENT('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: made.text } });
    } else {
      const json = JSON.stringify(made.call.args);
      out += SSE_EVENT('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: `toolu_decide_${n}`, name: made.call.name, input: {} } });
      out += SSE_EVENT('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } });
      for (let at = 0; at < json.length; at += 7) out += SSE_EVENT('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: json.slice(at, at + 7) } });
    }
    out += SSE_EVENT('content_block_stop', { type: 'content_block_stop', index: 0 });
    out += SSE_EVENT('message_delta', { type: 'message_delta', delta: { stop_reason: made.text ? 'end_turn' : 'tool_use', stop_sequence: null }, usage: { output_tokens: 12 } });
    return out + SSE_EVENT('message_stop', { type: 'message_stop' });
  },
  gemini(made, n) {
    const part = made.text ? { text: made.text } : { functionCall: { name: made.call.name, args: made.call.args } };
    return DATA({ candidates: [{ content: { parts: [part], role: 'model' }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 50, candidatesTokenCount: 5, totalTokenCount: 55 }, modelVersion: 'gemini-decider', responseId: `decide-${n}` });
  },
  'openai-responses'(made, n) {
    const id = `resp_decide_${n}`;
    const response = (status, output, usage = null) => ({ id, object: 'response', created_at: 1_743_082_657, status, error: null, incomplete_details: null, model: 'decider', output, usage });
    let out = SSE_EVENT('response.created', { type: 'response.created', response: response('in_progress', []) });
    let item;
    if (made.text) {
      item = { type: 'message', id: `msg_decide_${n}`, status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: made.text, annotations: [] }] };
      out += SSE_EVENT('response.output_item.added', { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', content: [] } });
      out += SSE_EVENT('response.content_part.added', { type: 'response.content_part.added', item_id: item.id, output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
      out += SSE_EVENT('response.output_text.delta', { type: 'response.output_text.delta', item_id: item.id, output_index: 0, content_index: 0, delta: made.text });
      out += SSE_EVENT('response.output_text.done', { type: 'response.output_text.done', item_id: item.id, output_index: 0, content_index: 0, text: made.text });
      out += SSE_EVENT('response.content_part.done', { type: 'response.content_part.done', item_id: item.id, output_index: 0, content_index: 0, part: item.content[0] });
    } else {
      const args = JSON.stringify(made.call.args);
      item = { type: 'function_call', id: `fc_decide_${n}`, call_id: `call_decide_${n}`, name: made.call.name, arguments: args, status: 'completed' };
      out += SSE_EVENT('response.output_item.added', { type: 'response.output_item.added', output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } });
      out += SSE_EVENT('response.function_call_arguments.delta', { type: 'response.function_call_arguments.delta', item_id: item.id, output_index: 0, delta: args });
      out += SSE_EVENT('response.function_call_arguments.done', { type: 'response.function_call_arguments.done', item_id: item.id, output_index: 0, arguments: args });
    }
    out += SSE_EVENT('response.output_item.done', { type: 'response.output_item.done', output_index: 0, item });
    return out + SSE_EVENT('response.completed', { type: 'response.completed', response: response('completed', [item], { input_tokens: 50, input_tokens_details: { cached_tokens: 0 }, output_tokens: 12, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 62 }) });
  },
};
