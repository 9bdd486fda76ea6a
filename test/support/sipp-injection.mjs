/**
 * The injection file (-inf) SIPp reads users from, as the tests and the
 * benchmarks write it: SEQUENTIAL, then `user;domain;[authentication …]` a line
 * (sipp-scenarios/ use [field0] as user, [field1] as domain, [field2] as credentials).
 * @param {ReadonlyArray<{ user: string, domain: string, password: string }>} users
 * @returns {string}
 */
export function injection(users) {
  return 'SEQUENTIAL\n' + users.map((u) => `${u.user};${u.domain};[authentication username=${u.user} password=${u.password}]`).join('\n') + '\n';
}
