import fc from 'fast-check';
import { FlowError, MAX_FLOW_NODES, type FlowNode, type FlowTaskIds } from '../../lib';
import { flowCalls, slotTag } from '../../lib/queue/flows/flow-keys';
import { planFlow } from '../../lib/queue/flows/flow-tree';

/** Trees of up to ~60 nodes over 4 queues (two share the tag {t}), ids unique by construction. */
/** A tree before its nodes get ids. */
interface Shape {
  queue: string;
  children?: Shape[];
}

const trees: fc.Arbitrary<FlowNode> = fc
  .letrec<{ node: Shape }>((tie) => ({
    node: fc.record(
      {
        queue: fc.constantFrom('a', 'b', '{t}c', '{t}d'),
        children: fc.array(tie('node'), { maxLength: 3 }),
      },
      { requiredKeys: ['queue'] },
    ),
  }))
  .node.map((shape) => {
    let n = 0;
    const number = (node: Shape): FlowNode => ({
      queue: node.queue,
      id: `n${n++}`,
      ...(node.children ? { children: node.children.map(number) } : {}),
    });
    return number(shape);
  });

const size = (node: FlowNode): number =>
  1 + (node.children ?? []).reduce((sum, c) => sum + size(c), 0);

const shapeOf = (node: FlowNode): FlowTaskIds => ({
  queue: node.queue,
  id: String(node.id),
  ...(node.children?.length ? { children: node.children.map(shapeOf) } : {}),
});

/** The `FlowError` `planFlow(flow)` refuses `flow` with (undefined when it plans it). */
function refusal(flow: unknown): FlowError | undefined {
  try {
    planFlow(flow);
  } catch (e) {
    return e as FlowError;
  }
  return undefined;
}

describe('planFlow (the checks of enqueueFlow before anything is written)', () => {
  it('plans every node once, parents before their children, and returns the ids in the tree’s shape', () => {
    fc.assert(
      fc.property(trees, (tree) => {
        const plan = planFlow(tree);
        expect(plan.nodes).toHaveLength(size(tree));
        expect(plan.ids).toEqual(shapeOf(tree));
        const seen = new Set<string>();
        for (const n of plan.nodes) {
          if (n.parent) expect(seen.has(`${n.parent.queue}:${n.parent.id}`)).toBe(true);
          seen.add(n.name);
        }
      }),
    );
  });

  it('writes a tree of one slot in one call, else level by level and slot, parents first', () => {
    fc.assert(
      fc.property(trees, (tree) => {
        const plan = planFlow(tree);
        expect(flowCalls(plan, true)).toEqual([plan.nodes]);
        const calls = flowCalls(plan, false);
        expect(calls.flat()).toHaveLength(plan.nodes.length);
        const written = new Set<string>();
        for (const call of calls) {
          expect(new Set(call.map((n) => slotTag(n.queue))).size).toBe(1);
          // A parent is written by an earlier call, or earlier in the same one (one slot).
          for (const n of call) {
            if (n.parent) expect(written.has(`${n.parent.queue}:${n.parent.id}`)).toBe(true);
            written.add(n.name);
          }
        }
      }),
    );
  });

  it('refuses a node that appears twice, naming it', () => {
    fc.assert(
      fc.property(
        trees.filter((t) => size(t) > 1),
        fc.nat(),
        (tree, pick) => {
          const all: FlowNode[] = [];
          const walk = (n: FlowNode) => {
            all.push(n);
            n.children?.forEach(walk);
          };
          walk(tree);
          const copied = all[pick % all.length];
          // The copy goes under the root, as another child.
          const twice = {
            ...tree,
            children: [...(tree.children ?? []), { ...copied, children: [] }],
          };
          const err = refusal(twice);
          expect(err).toBeInstanceOf(FlowError);
          expect(err?.node).toBe(`'${copied.queue}:${copied.id}'`);
        },
      ),
    );
  });

  it('refuses bad nodes anywhere, naming their path', () => {
    const bad = [null, 7, 'x', [], { queue: '', id: 1 }, { queue: 'a' }, { queue: 'a', id: {} }];
    for (const node of bad) {
      const err = refusal({
        queue: 'a',
        id: 'r',
        children: [{ queue: 'b', id: 'k', children: [node] }],
      });
      expect(err).toBeInstanceOf(FlowError);
      expect(err?.node).toBe("'b:k'.children[0]");
    }
  });

  it("refuses an id with NUL, which would let one parent's child outcomes be another's", () => {
    // Unrefused, parents 'a' (child c:'x\0c:2') and 'a\0c:x' (child c:'2') of one queue
    // shared the outcome field 'a\0c:x\0c:2': the second parent waited for its children forever.
    for (const flow of [
      { queue: 'P', id: 'a\0c:x', children: [{ queue: 'c', id: '2' }] },
      { queue: 'P', id: 'a', children: [{ queue: 'c', id: 'x\0c:2' }] },
    ]) {
      const err = refusal(flow);
      expect(err).toBeInstanceOf(FlowError);
      expect(err?.argument).toBe('id');
      expect(err?.node).toBe(flow.id === 'a' ? "'P:a'.children[0]" : 'root');
      expect(err?.message).toContain('a flow task id without NUL');
    }
  });

  it(`counts every level against MAX_FLOW_NODES (${MAX_FLOW_NODES})`, () => {
    const chain = (depth: number, width: number): FlowNode => ({
      queue: 'a',
      id: `d${depth}`,
      children: [
        ...Array.from({ length: width }, (_, i) => ({ queue: 'b', id: `d${depth}-${i}` })),
        ...(depth > 0 ? [chain(depth - 1, width)] : []),
      ],
    });
    // 10 levels of 1 + 99 leaves = 1,000 nodes exactly; one more is refused.
    expect(planFlow(chain(9, 99)).nodes).toHaveLength(1_000);
    expect(() => planFlow(chain(9, 100))).toThrow(/more than 1000 nodes/);
  });
});
