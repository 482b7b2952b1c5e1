// The context gauge: the engine's estimate of what the next request takes against the window
// (`runtime.context_usage`), the provider's cache hits of the last answer, and how the engine
// laid the last request out in stability tiers (`runtime.prompt_tiers`, seed 002's HUD).

import { count } from '../format.js';

export function render(node, chat) {
  const tiers = node.querySelector('#context-tiers');
  if (!chat) {
    node.querySelector('meter').value = 0;
    node.querySelector('span').textContent = '';
    tiers.textContent = '';
    return;
  }
  const usage = chat.runtime.context_usage ?? {};
  let last = null;
  for (let i = chat.messages.length - 1; i >= 0 && !last; i -= 1) if (chat.messages[i].usage) last = chat.messages[i].usage;
  const estimated = usage.estimated_tokens ?? 0;
  const budget = usage.n_ctx ?? 0;
  const cacheRead = last?.cache_read_tokens ?? 0;
  const prompt = last?.prompt_tokens ?? 0;
  node.dataset.estimated = String(estimated);
  node.dataset.budget = String(budget);
  node.dataset.cacheRead = String(cacheRead);
  // The answer streaming now joins the history when it ends: the engine counts it
  // (`draft_tokens`), so the gauge moves while a long answer fills the window.
  const streaming = usage.draft_tokens ?? 0;
  const total = estimated + streaming;
  node.dataset.streaming = String(streaming);
  node.querySelector('meter').value = budget ? Math.min(1, total / budget) : 0;
  const cache = prompt ? ` · cache hits ${count(cacheRead)} of ${count(prompt)} prompt tokens (${Math.round((100 * cacheRead) / prompt)}%)` : '';
  node.querySelector('span').textContent = `≈ ${count(total)} of ${count(budget)} tokens${streaming ? ' (with the answer streaming)' : ''}${leftOut(usage.left_out)}${cache}`;

  renderTiers(tiers, chat.runtime.prompt_tiers);
}

/** ` · 120 earlier messages left out, 3 tool results shortened` — the last request's, from the engine. */
function leftOut({ dropped = 0, shortened = 0 } = {}) {
  const parts = [];
  if (dropped) parts.push(`${count(dropped)} earlier message${dropped === 1 ? '' : 's'} left out`);
  if (shortened) parts.push(`${count(shortened)} tool result${shortened === 1 ? '' : 's'} shortened`);
  return parts.length ? ` · ${parts.join(', ')}` : '';
}

const TIERS = [['l0', 'L0'], ['l1', 'L1'], ['l2', 'L2'], ['l3', 'L3'], ['active', 'active']];

/** `L0 1.2k · L3 800 · active 2.1k` — each tier that holds something, estimated tokens. */
function renderTiers(node, tiers) {
  if (!tiers) {
    node.textContent = '';
    node.removeAttribute('title');
    return;
  }
  const short = (n) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
  const parts = TIERS.filter(([key]) => tiers[key] > 0).map(([key, name]) => `${name} ${short(tiers[key])}`);
  const moved = tiers.promoted || tiers.demoted || tiers.removed;
  const change = tiers.broken ? ` · ${tiers.broken} rewritten` : moved ? ' · moved' : '';
  node.textContent = parts.length ? `tiers: ${parts.join(' · ')}${change}` : '';
  node.title = `The last request in stability tiers (estimated tokens): what has stayed unchanged longest comes first (L0 to L3, each ending where the provider caches), what changes lately comes last (active). Moved up ${tiers.promoted}, down ${tiers.demoted}, dropped ${tiers.removed}.`;
  for (const [key] of TIERS) node.dataset[key] = String(tiers[key] ?? 0);
}

/** The gauge has no controls. */
export function bind() {}
