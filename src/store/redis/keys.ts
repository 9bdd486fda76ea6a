/** Default prefix of every sip-edge key in Redis (README "Storage"). */
export const DEFAULT_REDIS_PREFIX = 'sipedge:';

/** Redis glob-escape, so a prefix with `*?[]\\` matches only itself in SCAN MATCH. */
export function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}
