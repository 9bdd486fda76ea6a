/**
 * A JSON object read back from Redis, or null when the text is not one. What
 * comes back may be old, foreign or corrupt: a value that does not parse is
 * treated as absent, never trusted.
 */
export function jsonObject(text: unknown): Record<string, unknown> | null {
  if (typeof text !== 'string') return null;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}
