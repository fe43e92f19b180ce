import fc from 'fast-check';
import { LockKeyError, LockKeyValueMissingError } from '../../lib';
import { parseKeyTemplate, renderKeyTemplate } from '../../lib/decorators/key-template';

/** One piece of a generated template: literal text, or a placeholder with the value it names. */
type Piece =
  | { kind: 'text'; text: string }
  | { kind: 'slot'; index: number; path: string[]; value: string | number | bigint | boolean };

const identifier = fc.stringMatching(/^[A-Za-z_$][A-Za-z0-9_$]{0,7}$/);
const arrayIndex = fc.nat(20).map(String);
const scalar = fc.oneof(
  fc.string({ minLength: 1, maxLength: 12 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.bigInt(),
  fc.boolean(),
);
const piece: fc.Arbitrary<Piece> = fc.oneof(
  fc.string({ minLength: 1, maxLength: 12 }).map((text) => ({ kind: 'text' as const, text })),
  fc.record({
    kind: fc.constant('slot' as const),
    index: fc.nat(6),
    path: fc.array(fc.oneof(identifier, arrayIndex), { maxLength: 3 }),
    value: scalar,
  }),
);

/** The template text of pieces: `<` in literal text is written `<<`. */
function templateOf(pieces: Piece[]): string {
  return pieces
    .map((p) =>
      p.kind === 'text'
        ? p.text.replace(/</g, '<<')
        : `<${[String(p.index), ...p.path].join('.')}>`,
    )
    .join('');
}

/** Arguments holding every slot's value at its path (later slots on the same path win). */
function argsOf(pieces: Piece[]): unknown[] {
  const args: unknown[] = [];
  for (const p of pieces) {
    if (p.kind !== 'slot') continue;
    if (p.path.length === 0) {
      args[p.index] = p.value;
      continue;
    }
    const root = typeof args[p.index] === 'object' && args[p.index] ? args[p.index] : {};
    args[p.index] = root;
    let node = root as Record<string, unknown>;
    p.path.slice(0, -1).forEach((segment) => {
      const child = node[segment];
      node = (node[segment] = typeof child === 'object' && child ? child : {}) as Record<
        string,
        unknown
      >;
    });
    node[p.path[p.path.length - 1]] = p.value;
  }
  return args;
}

/** Reads a slot's value back the way the template resolver should. */
function read(args: unknown[], p: Extract<Piece, { kind: 'slot' }>): unknown {
  let value: unknown = args[p.index];
  for (const segment of p.path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

/** Pieces whose slots do not collide (a slot's path is never a prefix of another's). */
const consistentPieces = fc.array(piece, { minLength: 1, maxLength: 6 }).filter((pieces) => {
  const args = argsOf(pieces);
  return pieces.every((p) => p.kind === 'text' || read(args, p) === p.value);
});

describe('key templates', () => {
  describe('parseKeyTemplate', () => {
    it('splits literal text and <N> / <N.path> placeholders', () => {
      const t = parseKeyTemplate('account:<0.from>/<1>:<2.items.0.id>');
      expect(t.parts).toEqual([
        'account:',
        { index: 0, path: ['from'], text: '<0.from>' },
        '/',
        { index: 1, path: [], text: '<1>' },
        ':',
        { index: 2, path: ['items', '0', 'id'], text: '<2.items.0.id>' },
      ]);
      expect(t.maxIndex).toBe(2);
    });

    it('accepts a template without placeholders (a constant key)', () => {
      const t = parseKeyTemplate('nightly-report');
      expect(t.parts).toEqual(['nightly-report']);
      expect(t.maxIndex).toBe(-1);
      expect(renderKeyTemplate(t, [])).toBe('nightly-report');
    });

    it("reads '<<' as a literal '<' and a lone '>' as literal", () => {
      expect(renderKeyTemplate(parseKeyTemplate('a<<b>c<0>'), ['x'])).toBe('a<b>cx');
      expect(renderKeyTemplate(parseKeyTemplate('<<<0>>'), [7])).toBe('<7>');
    });

    it.each([
      ['', /must not be empty/],
      ['stock:<', /unclosed '<' at position 6/],
      ['stock:<0', /unclosed '<'/],
      ['stock:<0<1>', /unclosed '<'/],
      ['stock:<>', /invalid placeholder '<>'/],
      ['stock:<x>', /invalid placeholder '<x>'/],
      ['stock:<-1>', /invalid placeholder '<-1>'/],
      ['stock:<01>', /invalid placeholder '<01>'/],
      ['stock:< 0>', /invalid placeholder '< 0>'/],
      ['stock:<0.>', /invalid placeholder '<0.>'/],
      ['stock:<0..a>', /invalid placeholder '<0..a>'/],
      ['stock:<0.a-b>', /invalid placeholder '<0.a-b>'/],
      ['stock:<1e3>', /invalid placeholder '<1e3>'/],
    ])('rejects %j with LockKeyError naming the template', (template, message) => {
      expect(() => parseKeyTemplate(template)).toThrow(LockKeyError);
      expect(() => parseKeyTemplate(template)).toThrow(message);
      if (template) expect(() => parseKeyTemplate(template)).toThrow(`'${template}'`);
    });

    it('rejects a template that is not a string', () => {
      expect(() => parseKeyTemplate(42)).toThrow(LockKeyError);
      expect(() => parseKeyTemplate(undefined)).toThrow(/must be a string, got undefined/);
    });
  });

  describe('renderKeyTemplate', () => {
    it('renders strings, finite numbers, bigints and booleans', () => {
      const t = parseKeyTemplate('k:<0>:<1>:<2>:<3>');
      expect(renderKeyTemplate(t, ['sku-1', 4.5, 10n, false])).toBe('k:sku-1:4.5:10:false');
    });

    it.each([
      ['missing', [], /<0.id> cannot be read: <0> is undefined/],
      ['null', [null], /<0.id> cannot be read: <0> is null/],
      ['a missing field', [{}], /<0.id> is undefined/],
      ['an empty string', [{ id: '' }], /<0.id> is ''/],
      ['NaN', [{ id: NaN }], /<0.id> is NaN/],
      ['Infinity', [{ id: Infinity }], /<0.id> is Infinity/],
      ['an object', [{ id: { a: 1 } }], /<0.id> is an object/],
      ['an array', [{ id: [1] }], /<0.id> is an array of 1/],
      ['a function', [{ id: () => 1 }], /<0.id> is a function/],
      ['a symbol', [{ id: Symbol('s') }], /<0.id> is Symbol\(s\)/],
    ])('rejects %s with LockKeyError naming template and placeholder', (_what, args, message) => {
      const render = () => renderKeyTemplate(parseKeyTemplate('order:<0.id>'), args);
      expect(render).toThrow(LockKeyError);
      expect(render).toThrow("key template 'order:<0.id>'");
      expect(render).toThrow(message);
    });

    it.each([
      ['missing', [], true],
      ['null', [null], true],
      ['a missing field', [{}], true],
      ['an empty string', [{ id: '' }], true],
      ['NaN', [{ id: NaN }], false],
      ['an object', [{ id: { a: 1 } }], false],
      ['an array', [{ id: [1] }], false],
      ['a function', [{ id: () => 1 }], false],
    ])('%s is a value missing from the arguments: %s', (_what, args, missing) => {
      let err: unknown;
      try {
        renderKeyTemplate(parseKeyTemplate('order:<0.id>'), args);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(LockKeyError);
      expect(err instanceof LockKeyValueMissingError).toBe(missing);
      if (missing) {
        expect(err).toMatchObject({ placeholder: '<0.id>', argument: 0, path: ['id'] });
      }
    });
  });

  describe('properties', () => {
    it('any valid template renders the key its pieces describe', () => {
      fc.assert(
        fc.property(consistentPieces, (pieces) => {
          const expected = pieces
            .map((p) => (p.kind === 'text' ? p.text : String(p.value)))
            .join('');
          const template = parseKeyTemplate(templateOf(pieces));
          expect(renderKeyTemplate(template, argsOf(pieces))).toBe(expected);
          const slots = pieces.filter((p) => p.kind === 'slot');
          expect(template.maxIndex).toBe(Math.max(-1, ...slots.map((p) => p.index)));
        }),
        { numRuns: 500 },
      );
    });

    it('any template with a malformed placeholder is rejected with LockKeyError', () => {
      const valid = /^(0|[1-9][0-9]*)(\.([A-Za-z_$][A-Za-z0-9_$]*|0|[1-9][0-9]*))*$/;
      const badBody = fc
        .string({ maxLength: 10 })
        .filter((body) => !body.includes('<') && !body.includes('>') && !valid.test(body));
      const malformed = fc.oneof(
        // an invalid placeholder anywhere
        fc
          .tuple(fc.array(piece, { maxLength: 3 }), badBody, fc.array(piece, { maxLength: 3 }))
          .map(([before, body, after]) => `${templateOf(before)}<${body}>${templateOf(after)}`),
        // a '<' that is never closed, at the end
        fc
          .tuple(fc.array(piece, { maxLength: 3 }), badBody)
          .map(([before, body]) => `${templateOf(before)}<${body}`),
      );
      fc.assert(
        fc.property(malformed, (template) => {
          expect(() => parseKeyTemplate(template)).toThrow(LockKeyError);
        }),
        { numRuns: 500 },
      );
    });

    it('a placeholder whose value is not a usable scalar is rejected with LockKeyError', () => {
      const unusable = fc.oneof(
        fc.constantFrom(undefined, null, '', NaN, Infinity, -Infinity),
        fc.object(),
        fc.array(fc.anything()),
        fc.func(fc.string()),
      );
      fc.assert(
        fc.property(fc.nat(4), identifier, unusable, (index, field, value) => {
          const args: unknown[] = [];
          args[index] = { [field]: value };
          const template = parseKeyTemplate(`k:<${index}.${field}>`);
          expect(() => renderKeyTemplate(template, args)).toThrow(LockKeyError);
        }),
        { numRuns: 300 },
      );
    });
  });
});
