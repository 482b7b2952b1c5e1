// Settings → Agent: the system prompt (the engine's agent prompt unless the user writes another;
// the workspace's instructions, file list and the date are added after it) and the tool rules —
// each tool's rule is the user's, `auto`, `ask` or `deny`; a chat can only make one stricter.
import * as settingsStore from '../settings.js';
import { el } from '../view.js';

const q = (view, id) => view.querySelector(`[data-testid=${id}]`);

export default {
  id: 'agent',
  label: 'Agent',
  build() {
    return el('section', { class: 'settings-section' },
      el('label', {}, 'System prompt (the workspace\'s instructions, file list and the date are added after it)',
        el('textarea', { testid: 'system-prompt', id: 'system-prompt', rows: 8 })),
      el('fieldset', { testid: 'tool-policy', id: 'tool-policy' }, el('legend', { text: 'Tool rules' })));
  },
  fill(settings, view, ctx) {
    q(view, 'system-prompt').value = settings.system_prompt ?? '';
    drawRules(settings, view, ctx);
  },
  /** The workspace's tools changed (an MCP server became ready): its tools are listed too, and
   * the rules already chosen in the open dialog stay as chosen. */
  refresh(view, ctx) {
    drawRules(this.collect(settingsStore.loadSettings(), view), view, ctx);
  },
  collect(settings, view) {
    const tool_policy = { ...(settings.tool_policy ?? {}) };
    for (const select of view.querySelectorAll('[data-tool]')) tool_policy[select.dataset.tool] = select.value;
    return { ...settings, system_prompt: q(view, 'system-prompt').value.trim(), tool_policy };
  },
};

/** The system prompt's placeholder and a rule for each tool offered now (what the engine's module
 * knows: its default prompt, the tools' default rules), each set as `settings` choose. */
function drawRules(settings, view, ctx) {
  ctx.engine.defaults().then(({ prompt, rules }) => {
    q(view, 'system-prompt').placeholder = prompt;
    const policy = settingsStore.toolRules(settings, rules);
    q(view, 'tool-policy').replaceChildren(el('legend', { text: 'Tool rules (a chat can only make them stricter)' }), ...Object.keys(policy).map((tool) => el('label', { class: 'inline' },
      el('select', { testid: `policy-${tool}`, 'data-tool': tool }, ...['auto', 'ask', 'deny'].map((rule) => new Option(rule, rule, false, policy[tool] === rule))),
      ` ${tool}`)));
  }, (error) => ctx.say(String(error?.message ?? error), true));
}

