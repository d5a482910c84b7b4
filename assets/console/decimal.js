// Exact sums of the API's money strings ("0.012000"): a bar's total is added in whole
// billionths (BigInt), as the gateway keeps costs, never in floating point.

const SCALE = 9;

/** "0.012000" → 12000000n (billionths); null/"" → null. */
export function toNanos(text) {
  if (text === null || text === undefined || text === "") return null;
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(text));
  if (!match) return null;
  const fraction = (match[3] || "").slice(0, SCALE).padEnd(SCALE, "0");
  const nanos = BigInt(match[2]) * 10n ** BigInt(SCALE) + BigInt(fraction);
  return match[1] ? -nanos : nanos;
}

/** 12000000n, 6 → "0.012000". */
export function fromNanos(nanos, places) {
  const negative = nanos < 0n;
  const abs = negative ? -nanos : nanos;
  const whole = abs / 10n ** BigInt(SCALE);
  const digits = (abs % 10n ** BigInt(SCALE)).toString().padStart(SCALE, "0").slice(0, places);
  return `${negative ? "-" : ""}${whole}${places > 0 ? `.${digits}` : ""}`;
}

/** How many decimal places a money string has ("0.012000" → 6). */
export function places(text) {
  const dot = String(text).indexOf(".");
  return dot < 0 ? 0 : String(text).length - dot - 1;
}

/** The exact sum of money strings, with as many places as the longest of them. */
export function sum(texts) {
  let total = 0n;
  let most = 0;
  for (const text of texts) {
    const nanos = toNanos(text);
    if (nanos === null) continue;
    total += nanos;
    most = Math.max(most, places(text));
  }
  return fromNanos(total, Math.min(most, SCALE));
}
