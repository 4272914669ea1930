/**
 * DynamoDB's item size, the figure write units are charged by: attribute name bytes plus value bytes. Strings and
 * binary count their bytes, numbers about one byte per two significant digits plus one, sets the sum of their
 * members, lists and maps their members plus three bytes and one per member, booleans and nulls one byte.
 */
export function itemSize(item: Record<string, unknown>): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += Buffer.byteLength(name) + valueSize(value);
  return size;
}

function valueSize(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number') return Math.ceil(String(value).replace(/^-|\./g, '').length / 2) + 1;
  if (typeof value === 'boolean' || value === null || value === undefined) return 1;
  if (value instanceof Uint8Array) return value.byteLength;
  if (value instanceof Set) {
    let size = 0;
    for (const member of value) size += valueSize(member);
    return size;
  }
  if (Array.isArray(value)) return 3 + value.reduce((sum: number, member) => sum + 1 + valueSize(member), 0);
  if (typeof value === 'object') {
    let size = 3;
    for (const [name, member] of Object.entries(value as Record<string, unknown>))
      size += 1 + Buffer.byteLength(name) + valueSize(member);
    return size;
  }
  return Buffer.byteLength(String(value));
}
