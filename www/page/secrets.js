// The secrets the page holds: each provider kind's API key and the sync password, in this tab's
// memory, each bound to the origin it was given for — sent nowhere else (SECURITY E1) — and kept
// in the vault (`vault.js`) only when the user ticks "remember".
import * as vault from './vault.js';
import { originOf } from '../settings.js';

const keys = {};
const origins = {};

/** The secret of `name` if it was given for `baseUrl`'s origin, else ''. */
export function keyFor(name, baseUrl) {
  const origin = originOf(baseUrl ?? '');
  return keys[name] && origin && origins[name] === origin ? keys[name] : '';
}

/** Whether a secret of `name` is held, for whichever origin. */
export const has = (name) => Boolean(keys[name]);
export const originOfKey = (name) => origins[name] ?? '';

export function set(name, secret, baseUrl) {
  keys[name] = secret;
  origins[name] = originOf(baseUrl ?? '');
}

export function clear(name) {
  delete keys[name];
  delete origins[name];
}

/**
 * Takes the remembered secrets of `names` from the vault (once `palaver serve` unlocked it where
 * that is needed); returns the names whose secret is locked (it waits for `palaver serve`).
 */
export async function recall(names, baseUrlOf) {
  const locked = [];
  for (const name of names) {
    if (keys[name]) continue;
    const remembered = await vault.recall(name, originOf(baseUrlOf(name) ?? ''));
    if (remembered.locked) locked.push(name);
    if (remembered.key) {
      keys[name] = remembered.key;
      origins[name] = remembered.origin;
    }
  }
  return locked;
}

/** Opens the vault's second lock where it is needed (`proxy`: palaver serve); false when it cannot. */
export const unlock = (proxy) => vault.unlock(proxy);

/** Keeps (or forgets) each secret in the vault as the user chose. */
export async function persist(name, remember) {
  if (remember && keys[name]) await vault.remember(name, keys[name], origins[name]);
  else await vault.forget(name);
}
