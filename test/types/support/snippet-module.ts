import type { DocSnippet } from '../../../scripts/doc-snippets';

/**
 * Where the names a snippet uses without importing them come from, for the names of other
 * packages (the library's own exports are passed in, read from its entry points).
 */
const OTHER_EXPORTS: Record<string, readonly string[]> = {
  '@nestjs/common': [
    'Body',
    'ConflictException',
    'Controller',
    'Get',
    'HttpCode',
    'HttpStatus',
    'Injectable',
    'Logger',
    'Module',
    'OnModuleDestroy',
    'OnModuleInit',
    'Param',
    'Post',
    'UseGuards',
    'UseInterceptors',
  ],
  '@nestjs/core': ['APP_INTERCEPTOR', 'NestFactory'],
  '@nestjs/schedule': ['Cron', 'Interval', 'Timeout'],
  '@nestjs/terminus': ['HealthCheck', 'HealthCheckService', 'TerminusModule'],
  ioredis: ['Cluster'],
  'node:crypto': ['randomUUID'],
  rxjs: ['Subscription'],
};

/**
 * The members a snippet's class reaches through `this` without declaring them, typed as the
 * library's services (any other `this.x` is `any`: the user's own services are not shown).
 */
const KNOWN_MEMBERS: Record<string, string> = {
  locks: 'LockService',
  queues: 'QueueService',
  semaphores: 'SemaphoreService',
  fenced: 'FencedStore',
  events: 'RedisLockEvents',
  health: 'HealthCheckService',
  redisLock: 'RedisLockHealthIndicator',
};

type ChunkKind = 'top' | 'member' | 'statement';

const KEYWORDS = new Set(['if', 'for', 'while', 'switch', 'catch', 'function', 'return', 'with']);

/** What a line at the snippet's left margin starts: a declaration, a class member, or a statement. */
function kindOf(line: string): ChunkKind {
  if (
    /^(import|export|class|interface|declare|enum|function|async\s+function|abstract\s+class)\b/.test(
      line,
    ) ||
    /^type\s+\w+/.test(line)
  ) {
    return 'top';
  }
  if (/^(constructor\s*\(|(private|public|protected|readonly|static)\s)/.test(line))
    return 'member';
  const method = /^(?:async\s+)?([A-Za-z_$][\w$]*)\s*(?:<[^>]*>)?\(.*\)\s*(?::[^=]+)?\{/.exec(line);
  return method && !KEYWORDS.has(method[1]) ? 'member' : 'statement';
}

/** A line that continues the chunk above it (indented, a closing bracket, a comment or blank). */
const continues = (line: string) => line.trim() === '' || /^(\s|[})\]]|\/\/)/.test(line);

/**
 * Splits a snippet into chunks at its left margin: declarations (imports, classes, functions),
 * class members shown alone (a decorated method, a constructor), and statements.
 */
function chunks(code: string): { kind: ChunkKind; text: string }[] {
  const lines = code.split('\n');
  const out: { kind: ChunkKind; lines: string[] }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (continues(line) && out.length > 0) {
      out[out.length - 1].lines.push(line);
    } else if (continues(line)) {
      out.push({ kind: 'top', lines: [line] });
    } else if (line.startsWith('@')) {
      // Decorators, then what they decorate: a class (a declaration) or a method (a member).
      let j = i;
      while (j < lines.length && (lines[j].startsWith('@') || continues(lines[j]))) j++;
      const head = lines[j] ?? '';
      const kind = /^(export\s+)?(default\s+)?(abstract\s+)?class\b/.test(head) ? 'top' : 'member';
      out.push({ kind, lines: lines.slice(i, j + 1) });
      i = j;
    } else {
      out.push({ kind: kindOf(line), lines: [line] });
    }
  }
  return out.map((c) => ({ kind: c.kind, text: c.lines.join('\n') }));
}

/** Names the snippet imports or declares itself (they are not imported again). */
function ownNames(code: string): Set<string> {
  const names = new Set<string>();
  for (const [, list] of code.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from/g)) {
    for (const part of list.split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop();
      if (name) names.add(name);
    }
  }
  for (const [, name] of code.matchAll(
    /\b(?:class|interface|type|enum|function|const|let|var)\s+([A-Za-z_$][\w$]*)/g,
  )) {
    names.add(name);
  }
  return names;
}

/** `this.x` members used in `code` and not declared there, that `KNOWN_MEMBERS` types. */
function knownMembers(code: string): string[] {
  return Object.entries(KNOWN_MEMBERS)
    .filter(
      ([name]) =>
        new RegExp(`\\bthis\\.${name}\\b`).test(code) &&
        !new RegExp(`\\b(private|public|protected|readonly)\\s+(readonly\\s+)?${name}\\b`).test(
          code,
        ),
    )
    .map(([name, type]) => `  ${name}!: ${type};`);
}

/**
 * The TypeScript module that type-checks a documented snippet as a user would write it: the code
 * itself, with `…` (elided code) removed and a `@ts-expect-error` above each line it marks
 * `// error`; imports of the library's and Nest's names it uses
 * without importing them; class members shown alone put in a class, and statements in an async
 * method of it; and, on every class, an index signature, so that `this.x` of a service the
 * snippet does not show is `any` (the library's services are typed, `KNOWN_MEMBERS`). What a
 * snippet needs of the user's own code (an `Order`, a `mailer`) is declared in docs/world.d.ts.
 * @param libraryExports the names exported by each library entry point, by module specifier
 * @example
 * snippetModule({ file: 'docs/queue.md', line: 1, code: 'await queues.stats(ORDERS);' }, exports)
 */
export function snippetModule(
  snippet: DocSnippet,
  libraryExports: ReadonlyMap<string, readonly string[]>,
): string {
  // A line the docs mark `// error: …` must fail: the check expects it.
  const code = snippet.code
    .replace(/…/g, '')
    .replace(
      /^([ \t]*)(.*\/\/\s*error\b.*)$/gm,
      '$1// @ts-expect-error the docs show it fails\n$1$2',
    );
  const parts = chunks(code);
  const pick = (kind: ChunkKind) =>
    parts
      .filter((c) => c.kind === kind)
      .map((c) => c.text)
      .join('\n');
  const top = pick('top');
  const members = pick('member');
  const statements = pick('statement');

  const body: string[] = [top];
  // An interface merged into each class adds the index signature (and the typed services).
  for (const [, exported, name] of top.matchAll(/^(export\s+)?(?:abstract\s+)?class\s+(\w+)/gm)) {
    body.push(
      `${exported ?? ''}interface ${name} {`,
      '  [key: string]: any;',
      ...knownMembers(top).map((m) => m.replace('!:', ':')),
      '}',
    );
  }
  if (members || statements) {
    body.push(
      'class DocSnippet {',
      '  [key: string]: any;',
      ...knownMembers(members + statements),
      members,
      '  async statements() {',
      statements,
      '  }',
      '}',
    );
  }
  const text = body.join('\n');

  const own = ownNames(code);
  const imports = new Map<string, string[]>();
  const sources = [...libraryExports, ...Object.entries(OTHER_EXPORTS)];
  const taken = new Set(own);
  for (const [from, names] of sources) {
    for (const name of names) {
      if (taken.has(name) || !new RegExp(`(^|[^\\w$.])${name}\\b`).test(text)) continue;
      taken.add(name);
      imports.set(from, [...(imports.get(from) ?? []), name]);
    }
  }
  const header = [...imports].map(
    ([from, names]) => `import { ${names.join(', ')} } from '${from}';`,
  );
  return [`// ${snippet.file}:${snippet.line}`, ...header, text, 'export {};', ''].join('\n');
}
