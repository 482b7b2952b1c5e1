// The plan as it stands (SPEC §8.2): the engine reports it in `runtime.plan` (base, version and
// updates in order); shown above the cards, open.
import { el } from '../view.js';

export default {
  name: 'plan',
  slot: 'plan',
  select: (chat) => chat.runtime.plan ?? null,
  render(plan, { html }) {
    const body = el('div', { class: 'markdown' });
    body.innerHTML = html(plan.body);
    const updates = (plan.updates ?? []).map(([, text]) => text);
    const count = `${updates.length} update${updates.length === 1 ? '' : 's'}`;
    return el('details', { open: true }, el('summary', { text: `Plan (version ${plan.version}, ${count})` }),
      body, el('ol', { class: 'plan-updates', testid: 'plan-updates' }, ...updates.map((u) => el('li', { text: u }))));
  },
  actions: {},
};
