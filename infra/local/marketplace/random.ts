/** A small seeded PRNG (mulberry32), so simulated traffic and faults repeat run after run. */
export interface Random {
  /** Uniform in [0, 1). */
  next(): number;
  /** True with probability p. */
  chance(p: number): boolean;
  /** An integer in [min, max]. */
  between(min: number, max: number): number;
  /** A key of a weight table, drawn by weight. */
  pick<K extends string>(weights: Readonly<Record<K, number>>): K;
  /** A deterministic UUID-shaped string. */
  uuid(): string;
}

export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(next() * 16).toString(16)).join('');
  return {
    next,
    chance: (p) => p > 0 && next() < p,
    between: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick(weights) {
      const entries = Object.entries(weights) as [keyof typeof weights, number][];
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      let draw = next() * total;
      for (const [key, weight] of entries) {
        draw -= weight;
        if (draw < 0) return key;
      }
      return entries[entries.length - 1]?.[0] as keyof typeof weights;
    },
    uuid: () => `${hex(8)}-${hex(4)}-4${hex(3)}-${'89ab'[Math.floor(next() * 4)]}${hex(3)}-${hex(12)}`,
  };
}
