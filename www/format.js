// How the page writes numbers and times for a person. Written by hand, not with the browser's
// `Intl` (`toLocaleString`): its first use in a fresh tab loads the locale data, 15–22 ms on the
// main thread while a chat opens (measured in a new tab; issue 41). A leaf: it imports nothing.

/** `12,345` — a count with thousands separators, as `toLocaleString('en')` writes it (at most
 *  three decimals). */
export function count(n) {
  if (!Number.isFinite(n)) return String(n);
  const rounded = Math.round(Math.abs(n) * 1000) / 1000;
  const [whole, fraction] = String(rounded).split('.');
  const grouped = whole.replace(/\B(?=(\d{3})+$)/g, ',');
  const sign = n < 0 && rounded !== 0 ? '-' : '';
  return `${sign}${grouped}${fraction ? `.${fraction}` : ''}`;
}

const two = (n) => String(n).padStart(2, '0');

/** `2026-01-01 06:00` — a moment in this device's time zone. */
export function moment(ms) {
  const at = new Date(ms);
  if (Number.isNaN(at.getTime())) return '';
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${two(at.getHours())}:${two(at.getMinutes())}`;
}
