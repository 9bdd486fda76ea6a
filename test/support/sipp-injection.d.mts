/**
 * The injection file (-inf) SIPp reads users from: SEQUENTIAL, then
 * `user;domain;[authentication …]` a line.
 */
export function injection(users: ReadonlyArray<{ user: string; domain: string; password: string }>): string;
