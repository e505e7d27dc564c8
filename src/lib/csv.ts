/**
 * A streaming CSV reader (RFC 4180 plus the usual leniencies) and the writer's field quoting.
 *
 * Why not csv-parse: a line without a quote character (nearly every line of a voter roll) is split with
 * `String.prototype.split`, which is several times faster than a character-by-character parser; lines
 * with quotes take the full path. Records are reported with the line on which they start (header = 1),
 * which is what an import's error report needs.
 */

const QUOTE = 34; // "
const COMMA = 44; // ,
const LF = 10;
const CR = 13;

export class CsvError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
    this.name = 'CsvError';
  }
}

export type CsvRecordHandler = (fields: string[], line: number) => void;

/**
 * Feed it text with `push` (any chunking: a record may span chunks) and call `end` after the last chunk.
 * Each complete record goes to `onRecord` with its starting line. Blank lines are skipped. Lines end in LF,
 * CRLF or, when the first line does, CR alone (classic Mac OS). A record longer than `maxRecordChars` (an
 * unclosed quote, or not a CSV at all) throws a CsvError, whether it arrives whole or in pieces, and the rest
 * of the file is never buffered.
 */
export class CsvReader {
  private rest = '';
  private line = 1;
  /** How lines end, from the first line that ends: LF or CRLF, or CR alone (classic Mac OS, read as LF). */
  private lineEnd: 'unknown' | 'lf' | 'cr' = 'unknown';

  constructor(
    private readonly onRecord: CsvRecordHandler,
    private readonly maxRecordChars = 1 << 20,
  ) {}

  push(text: string): void {
    const s = this.lineEnds(this.rest.length > 0 ? this.rest + text : text, false);
    const consumed = this.parse(s, false);
    this.rest = s.slice(consumed);
    if (this.rest.length > this.maxRecordChars) throw this.tooLong(this.line, this.rest.includes('"'));
  }

  /** The error for a record over maxRecordChars that starts on `line`. */
  private tooLong(line: number, quoted: boolean): CsvError {
    const limit = `${this.maxRecordChars.toLocaleString('en')} characters`;
    return new CsvError(
      line,
      quoted
        ? `the record starting on line ${line} is longer than ${limit}: a quoted field is not closed, or this is not a CSV file.`
        : `line ${line} is longer than ${limit}: no record can be that long, so this is not a CSV file of records.`,
    );
  }

  private lineEnds(s: string, final: boolean): string {
    if (this.lineEnd === 'unknown') {
      const at = s.search(/[\r\n]/);
      if (at >= 0 && (s.charCodeAt(at) === LF || at + 1 < s.length || final))
        this.lineEnd = s.charCodeAt(at) === CR && s.charCodeAt(at + 1) !== LF ? 'cr' : 'lf';
    }
    return this.lineEnd === 'cr' ? s.replaceAll('\r', '\n') : s;
  }

  end(): void {
    const s = this.lineEnds(this.rest, true);
    this.rest = '';
    const consumed = this.parse(s, true);
    if (consumed < s.length) {
      throw new CsvError(this.line, `the quoted field starting on line ${this.line} is not closed.`);
    }
  }

  /** Parses complete records of `s`; returns how many characters were consumed. */
  private parse(s: string, final: boolean): number {
    const n = s.length;
    let i = 0;
    // The next quote at or after i (n when none): found once, so quote-free text is never rescanned.
    let nextQuote = s.indexOf('"');
    if (nextQuote < 0) nextQuote = n;
    while (i < n) {
      let nl = s.indexOf('\n', i);
      if (nextQuote < i) {
        nextQuote = s.indexOf('"', i);
        if (nextQuote < 0) nextQuote = n;
      }
      if (nl < 0) {
        if (!final) return i;
        nl = n;
      }
      if (nextQuote >= nl) {
        // Fast path: no quote on this line.
        if (nl - i > this.maxRecordChars) throw this.tooLong(this.line, false);
        const end = nl > i && s.charCodeAt(nl - 1) === CR ? nl - 1 : nl;
        if (end > i) this.onRecord(s.slice(i, end).split(','), this.line);
        this.line += 1;
        i = nl + 1;
        continue;
      }
      const line = this.line;
      const next = this.quotedRecord(s, i, final);
      if (next < 0) return i;
      if (next - i > this.maxRecordChars + 1) throw this.tooLong(line, true);
      i = next;
    }
    return n;
  }

  /** The full parser for a record with quotes, from i. Returns the index after it, or -1 if incomplete. */
  private quotedRecord(s: string, start: number, final: boolean): number {
    const n = s.length;
    const fields: string[] = [];
    let field = '';
    let newlines = 0;
    let j = start;
    for (;;) {
      // At the start of a field.
      if (j < n && s.charCodeAt(j) === QUOTE) {
        j += 1;
        for (;;) {
          const k = s.indexOf('"', j);
          if (k < 0) return -1;
          field += s.slice(j, k);
          if (k + 1 >= n && !final) return -1; // cannot tell "" from a closing quote yet
          if (s.charCodeAt(k + 1) === QUOTE) {
            field += '"';
            j = k + 2;
            continue;
          }
          j = k + 1;
          break;
        }
        for (let p = field.indexOf('\n'); p >= 0; p = field.indexOf('\n', p + 1)) newlines += 1;
      }
      // The unquoted rest of the field (all of it, or stray text after a closing quote, kept as is).
      let k = j;
      while (k < n) {
        const c = s.charCodeAt(k);
        if (c === COMMA || c === LF) break;
        k += 1;
      }
      if (k >= n && !final) return -1;
      let piece = s.slice(j, k);
      if (k >= n || s.charCodeAt(k) === LF) {
        if (piece.length > 0 && piece.charCodeAt(piece.length - 1) === CR) piece = piece.slice(0, -1);
        fields.push(field + piece);
        this.onRecord(fields, this.line);
        this.line += newlines + 1;
        return k + 1;
      }
      fields.push(field + piece);
      field = '';
      j = k + 1;
    }
  }
}

const NEEDS_QUOTES = /[",\r\n]/;
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** True when a spreadsheet would run the value as a formula: it starts with = + - @ tab or CR and is not a number. */
function isFormulaLike(value: string): boolean {
  return FORMULA_START.test(value) && !PLAIN_NUMBER.test(value);
}

/**
 * Whether `value` gets a leading apostrophe on export: a formula-like value, or one that already starts
 * with apostrophes in front of a formula-like value (so that `unguardFormula` can tell the two apart and an
 * exported file imports back unchanged).
 */
function needsGuard(value: string): boolean {
  let i = 0;
  while (value.charCodeAt(i) === 39) i += 1; // '
  return isFormulaLike(i === 0 ? value : value.slice(i));
}

/** Export: neutralises a value a spreadsheet would run as a formula by prefixing `'`. */
export function guardFormula(value: string): string {
  return needsGuard(value) ? `'${value}` : value;
}

/** Import: undoes `guardFormula` (removes the one apostrophe it added, and only that). */
export function unguardFormula(value: string): string {
  return value.charCodeAt(0) === 39 && needsGuard(value.slice(1)) ? value.slice(1) : value;
}

/** True when the first character is one that may need the formula guard: = + - @ tab CR or '. */
export function mayNeedGuard(value: string): boolean {
  const c = value.charCodeAt(0);
  return c === 61 || c === 43 || c === 45 || c === 64 || c === 9 || c === 13 || c === 39;
}

/** One CSV field: formula-guarded, quoted when it holds a quote, comma or line break. */
export function csvField(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return String(value);
  const guarded = mayNeedGuard(value) ? guardFormula(value) : value;
  return NEEDS_QUOTES.test(guarded) ? `"${guarded.replace(/"/g, '""')}"` : guarded;
}
