// Settings → Provider, in the order a person fills it: the kind, its address, the key, Test the
// connection (it lists the models and the windows the server says), the model, then the window
// and limits; the fallback models last. Each kind keeps its own address, model and key. A link's
// proposal (`#provider=…`) only pre-fills the form, with a notice naming the host (SECURITY E1).
import * as settingsStore from '../settings.js';
import * as secrets from '../page/secrets.js';
import * as info from '../provider-info.js';
import { el } from '../view.js';
import { count } from '../format.js';

const KINDS = [
  ['openai-chat', 'OpenAI-compatible chat (OpenAI, Ollama, OpenRouter, llama.cpp, vLLM, …)'],
  ['anthropic', 'Anthropic'],
  ['gemini', 'Gemini'],
  ['openai-responses', 'OpenAI Responses'],
  ['local', 'Model in this browser (llama.cpp, offline)'],
];

const field = (label, input, extra = {}) => el('label', extra, label, ' ', input);
const q = (view, id) => view.querySelector(`[data-testid=${id}]`);

export default {
  id: 'provider',
  label: 'Provider',
  build(ctx) {
    const kind = el('select', { testid: 'provider-kind', id: 'provider-kind' }, ...KINDS.map(([value, text]) => new Option(text, value)));
    const base = el('input', { testid: 'provider-base-url', id: 'provider-base-url', type: 'url', placeholder: 'https://api.openai.com/v1' });
    const key = el('input', { testid: 'provider-key', id: 'provider-key', type: 'password', autocomplete: 'off' });
    const model = el('input', { testid: 'provider-model', id: 'provider-model', placeholder: 'gpt-4.1', autocomplete: 'off' });
    model.setAttribute('list', 'model-list');
    const view = el('section', { class: 'settings-section' },
      el('p', { class: 'hint', text: 'Pick the kind, give its address and key, Test the connection, pick a model, Save.' }),
      el('p', { class: 'notice', testid: 'proposal-notice', hidden: true }),
      field('Kind', kind),
      field('Base URL', base, { class: 'remote-only' }),
      field('API key', key, { class: 'remote-only' }),
      el('p', { class: 'notice', testid: 'key-note', hidden: true }),
      el('label', { class: 'inline remote-only' }, el('input', { type: 'checkbox', testid: 'remember-key' }), ' Remember the key on this device (encrypted; where the app runs from this machine, also locked by palaver serve)'),
      el('p', { class: 'inline-actions remote-only' },
        el('button', { type: 'button', testid: 'list-models', text: 'Test the connection (lists its models)', onclick: () => testConnection(view) }),
        ' ', el('span', { testid: 'model-status', role: 'status' })),
      field('Model', model),
      el('datalist', { id: 'model-list', testid: 'model-list' }),
      el('label', { class: 'inline' }, el('input', { type: 'checkbox', testid: 'provider-plain-chat' }),
        ' Plain chat: a short prompt and no tools (for small models, and servers that cannot call tools)'),
      el('label', { class: 'inline' }, el('input', { type: 'checkbox', testid: 'provider-edit-blocks' }),
        ' …with edit blocks: the model proposes file changes in its answer, which you review and apply (needs palaver serve)'),
      el('fieldset', { class: 'model-settings' }, el('legend', { text: 'Window and limits' }),
        field('Context window (tokens)', el('input', { testid: 'provider-n-ctx', type: 'number', min: 256, step: 1, placeholder: 'from the provider' })),
        field('Max output tokens', el('input', { testid: 'provider-max-tokens', type: 'number', min: 1, step: 1, placeholder: 'from the provider' })),
        field('Temperature', el('input', { testid: 'provider-temperature', type: 'number', min: 0, max: 2, step: 0.1, placeholder: 'provider default' })),
        field('Reasoning effort (OpenAI)', el('select', { testid: 'provider-reasoning' }, new Option('provider default', ''), new Option('low', 'low'), new Option('medium', 'medium'), new Option('high', 'high')), { class: 'remote-only' }),
        field('Thinking budget (Anthropic, Gemini; tokens)', el('input', { testid: 'provider-thinking', type: 'number', min: 0, step: 1, placeholder: 'off' }), { class: 'remote-only' })),
      el('label', {}, 'Fallback models, tried in order when this one fails after its retries (overloaded, rate limited, a server error, an unknown model, a context too long — never a key or quota error). One per line: ', el('code', { text: 'kind model' }), '; the kind must be configured.',
        el('textarea', { testid: 'fallback-models', rows: 2, placeholder: 'openai-chat gpt-4o-mini' })));
    kind.addEventListener('change', () => fillKind(view, settingsStore.loadSettings(), kind.value, ctx.proposalFor?.(kind.value)));
    base.addEventListener('input', () => showKey(view));
    key.addEventListener('input', () => { view.keyTyped = true; });
    model.addEventListener('change', () => fillWindow(view));
    q(view, 'provider-n-ctx').addEventListener('input', () => showOutputDefault(view));
    view.models = [];
    view.outputTokens = null;
    return view;
  },

  fill(settings, view, ctx, proposal) {
    view.keyTyped = false;
    // The default answer limit is the engine's rule, asked of it when Settings open (the page
    // does not restate it; a first visit fetches no engine).
    if (!view.outputTokens) {
      ctx.engine.defaults().then(({ outputTokens }) => {
        view.outputTokens = outputTokens;
        showOutputDefault(view);
      }).catch(() => {});
    }
    const kind = proposal?.kind ?? settings.kind;
    q(view, 'provider-kind').value = kind;
    fillKind(view, settings, kind, proposal);
    const notice = q(view, 'proposal-notice');
    notice.hidden = !proposal;
    if (proposal) {
      const host = settingsStore.originOf(q(view, 'provider-base-url').value) || 'an address that is not a URL';
      notice.textContent = `A link proposes these ${kind} settings, sending requests to ${host}. Nothing changes until you Save; your key is not sent there unless you type it.`;
    }
    q(view, 'remember-key').checked = Boolean(settings.remember_key);
    q(view, 'fallback-models').value = settingsStore.formatFallbackModels(settings.fallback_models);
    q(view, 'model-status').textContent = '';
    ctx.proposalFor = (k) => (proposal && (proposal.kind ?? settings.kind) === k ? proposal : null);
  },

  collect(settings, view) {
    const kind = q(view, 'provider-kind').value;
    const next = settingsStore.withProvider(settings, kind, q(view, 'provider-base-url').value.trim(), q(view, 'provider-model').value.trim(), modelSettings(view));
    next.fallback_models = settingsStore.parseFallbackModels(q(view, 'fallback-models').value);
    next.remember_key = q(view, 'remember-key').checked;
    // A typed key is bound to the origin saved with it; an empty field clears a key that was
    // shown (same origin); a key given for another origin stays bound there and is not sent.
    const baseUrl = settingsStore.activeProvider(next).base_url;
    const typed = q(view, 'provider-key').value;
    if (typed) secrets.set(kind, typed, baseUrl);
    else if (secrets.keyFor(kind, baseUrl)) secrets.clear(kind);
    q(view, 'provider-key').value = '';
    return next;
  },

  /** Remembered keys were unlocked after the form opened: shown, unless the user typed one. */
  refresh(view) {
    if (!view.keyTyped) showKey(view);
  },

  /** A fallback of a kind that is not configured could never answer: refused with a sentence. */
  check(settings, view) {
    const unknown = q(view, 'fallback-models').value.split('\n').map((line) => line.trim()).find((line) => line && !settingsStore.PROVIDER_KINDS.includes(line.split(/\s+/)[0]));
    if (unknown) return `"${unknown}" is not a fallback model: write one per line as a kind (${settingsStore.PROVIDER_KINDS.join(', ')}) and a model name.`;
    const missing = (settings.fallback_models ?? []).find((m) => !settings.providers?.[m.provider]?.base_url);
    if (missing) return `The fallback "${missing.provider} ${missing.model}" cannot work: no ${missing.provider} provider is configured. Configure it first (pick its kind above, give its address and key, Save), or remove that line.`;
    return null;
  },
};

function modelSettings(view) {
  const number = (id) => (q(view, id).value === '' ? undefined : Number(q(view, id).value));
  const fields = {
    n_ctx: number('provider-n-ctx'), max_tokens: number('provider-max-tokens'), temperature: number('provider-temperature'),
    reasoning_effort: q(view, 'provider-reasoning').value || undefined, thinking_budget: number('provider-thinking'),
    tool_use: !q(view, 'provider-plain-chat').checked,
    edit_blocks: q(view, 'provider-plain-chat').checked && q(view, 'provider-edit-blocks').checked,
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && !Number.isNaN(v)));
}

/** The fields for `kind`, as configured (each kind keeps its own URL, model and key). */
function fillKind(view, settings, kind, proposal) {
  const config = settings.providers[kind] ?? {};
  const local = kind === 'local';
  for (const node of view.querySelectorAll('.remote-only')) node.hidden = local;
  const fromLink = proposal ?? {};
  q(view, 'provider-base-url').value = fromLink.base_url ?? (local ? '' : config.base_url ?? '');
  q(view, 'provider-model').value = fromLink.model ?? config.model ?? '';
  q(view, 'provider-n-ctx').value = config.n_ctx ?? '';
  q(view, 'provider-max-tokens').value = config.max_tokens ?? '';
  q(view, 'provider-plain-chat').checked = config.tool_use === false || (local && config.tool_use !== true);
  q(view, 'provider-edit-blocks').checked = config.edit_blocks === true;
  view.said = config.said?.model === config.model ? config.said : (local ? { n_ctx: 4096, from: 'default' } : null);
  q(view, 'provider-temperature').value = config.temperature ?? '';
  q(view, 'provider-reasoning').value = config.reasoning_effort ?? '';
  q(view, 'provider-thinking').value = config.thinking_budget ?? '';
  view.querySelector('#model-list').replaceChildren();
  view.models = [];
  view.keyTyped = false;
  showKey(view);
  showWindow(view);
}

/** The key field shows a key only for the origin it was given for, and says so otherwise. */
function showKey(view) {
  const kind = q(view, 'provider-kind').value;
  const baseUrl = q(view, 'provider-base-url').value.trim();
  q(view, 'provider-key').value = secrets.keyFor(kind, baseUrl);
  const elsewhere = secrets.has(kind) && !secrets.keyFor(kind, baseUrl);
  q(view, 'key-note').hidden = !elsewhere;
  if (elsewhere) {
    const to = settingsStore.originOf(baseUrl) || 'this address';
    q(view, 'key-note').textContent = `Your ${kind} key was given for ${secrets.originOfKey(kind) || 'another address'}; it is not sent to ${to} unless you type it here.`;
  }
}

/** Lists the provider's models into the model field's suggestions; says what is wrong if it fails. */
async function testConnection(view) {
  const kind = q(view, 'provider-kind').value;
  const baseUrl = q(view, 'provider-base-url').value.trim();
  const key = q(view, 'provider-key').value || secrets.keyFor(kind, baseUrl);
  const status = q(view, 'model-status');
  status.textContent = 'Asking the provider…';
  status.className = '';
  try {
    view.models = await info.listModels(kind, baseUrl, key);
    view.querySelector('#model-list').replaceChildren(...view.models.map((m) => new Option(m.n_ctx ? `${count(m.n_ctx)} tokens` : '', m.id)));
    const typed = q(view, 'provider-model').value.trim();
    const missing = typed && view.models.length && !view.models.some((m) => m.id === typed);
    status.textContent = missing
      ? `The connection works, but it does not serve the model ${typed}: pick one of its ${view.models.length} models in the Model field.`
      : view.models.length ? `The connection works: ${view.models.length} models, pick one in the Model field.` : 'The connection works, but the provider lists no models; type a model name.';
    if (missing) status.className = 'error';
    if (view.models.length && !typed) q(view, 'provider-model').value = view.models[0].id;
    fillWindow(view);
  } catch (error) {
    view.models = [];
    view.querySelector('#model-list').replaceChildren();
    status.textContent = error.message;
    status.className = 'error';
  }
}

/** What the provider (or, failing that, the table) says of the chosen model, as the fields' hints. */
function fillWindow(view) {
  const model = q(view, 'provider-model').value.trim();
  const listed = view.models?.find((m) => m.id === model) ?? (view.models?.length === 1 && view.models[0].server ? view.models[0] : null);
  const table = info.knownWindow(model);
  view.said = listed?.n_ctx
    ? { n_ctx: listed.n_ctx, max_output_tokens: listed.max_output, from: 'provider' }
    : table ? { n_ctx: table, from: 'table' } : null;
  showWindow(view);
}

/** The window field's hint: what the server says (kept when Settings are saved), or the table's. */
function showWindow(view) {
  const said = view.said;
  const words = { provider: 'the server says', refusal: 'the server said when it refused a prompt', table: 'a guess from the model name: the server did not say', default: 'the default' };
  q(view, 'provider-n-ctx').placeholder = said?.n_ctx ? `${count(said.n_ctx)} (${words[said.from] ?? 'the server says'})` : 'asked of the server when you Save';
  showOutputDefault(view);
}

/** The answer limit's hint: the model's own (as the server says), else a quarter of the window. */
function showOutputDefault(view) {
  const window = Number(q(view, 'provider-n-ctx').value) || view.said?.n_ctx;
  const own = view.said?.max_output_tokens;
  const limit = window && view.outputTokens ? view.outputTokens(window, own) : own;
  q(view, 'provider-max-tokens').placeholder = limit
    ? `${count(limit)} (${own ? 'the model\'s own limit' : 'a quarter of the window'})`
    : 'a quarter of the window';
}
