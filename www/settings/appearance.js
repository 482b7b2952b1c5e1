// Settings → Appearance: the theme (follows the system, light or dark; the same switch as the
// sidebar's), remembered on this device.
import { applyTheme } from '../keys.js';
import { el } from '../view.js';

const THEMES = [['auto', 'Follow the system'], ['light', 'Light'], ['dark', 'Dark']];

export default {
  id: 'appearance',
  label: 'Appearance',
  build() {
    const select = el('select', { testid: 'theme-select' }, ...THEMES.map(([value, text]) => new Option(text, value)));
    select.addEventListener('change', () => {
      localStorage.setItem('palaver.theme', select.value);
      applyTheme(document.getElementById('theme'));
    });
    return el('section', { class: 'settings-section' }, el('label', {}, 'Theme ', select));
  },
  fill(_settings, view) {
    view.querySelector('[data-testid=theme-select]').value = applyTheme(document.getElementById('theme'));
  },
  collect: (settings) => settings,
};
