import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The key prefix of the documented ACL (docs/redis-setup.md), replaced by the test's own. */
const DOC_PREFIX = 'orders:';
const DOC_USER = 'orders-app';
const DOC_PASSWORD = 'change-me';

/**
 * The rules of the `ACL SETUSER` line of docs/redis-setup.md under the marker
 * `<!-- acl:NAME -->` (what follows the user name), with password `pw` and key/channel prefix
 * `prefix`: the tests run under exactly what the docs tell users to configure.
 */
export function documentedAcl(name: string, pw: string, prefix: string): string[] {
  const doc = readFileSync(join(__dirname, '../../docs/redis-setup.md'), 'utf8');
  const block = new RegExp(`<!-- acl:${name} -->\\s*\`\`\`[a-z]*\\n([^\`]+)\`\`\``).exec(doc);
  if (!block) throw new Error(`docs/redis-setup.md has no <!-- acl:${name} --> block`);
  const words = block[1].replace(/\\\n/g, ' ').trim().split(/\s+/);
  if (words[0] !== 'ACL' || words[1] !== 'SETUSER' || words[2] !== DOC_USER) {
    throw new Error(`the acl:${name} block is not 'ACL SETUSER ${DOC_USER} …': ${block[1]}`);
  }
  return words
    .slice(3)
    .map((w) => (w === `>${DOC_PASSWORD}` ? `>${pw}` : w.replace(DOC_PREFIX, prefix)));
}
