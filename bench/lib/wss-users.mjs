/** The i-th WSS bench user (1-based): shared by the WSS part and its client processes. */
export function wssUser(i) {
  return { user: `w${String(i).padStart(6, '0')}`, password: `wss-pw-${i}-x` };
}
