/**
 * The ```ts blocks of the README and docs/*.md that are not type-checked, each with the reason:
 * fragments that are not code on their own. Each names its block by a line of it (`contains`);
 * an entry that matches no block fails the type tests, so the list cannot outlive the docs.
 */
export const SNIPPET_EXCEPTIONS: readonly { file: string; contains: string; reason: string }[] = [
  {
    file: 'docs/decorator.md',
    contains: '// or per controller / handler',
    reason:
      'three alternatives side by side, one a module property and one a decorator with nothing ' +
      'under it; each is in test/types/cases/lock-interceptor.ts',
  },
];
