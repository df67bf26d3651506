// W3C trace context carried through the wire protocol. MongoDB's wire protocol has no header
// slot, so a client puts its `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header)
// in a top-level command field `$traceparent` (a string), or in the command's `comment` — the
// comment string itself, `traceparent='<value>'` inside it (sqlcommenter style), or a comment
// document's `traceparent` string field. `$traceparent` is removed before the command reaches a
// pipeline step or the upstream (a server refuses unknown `$` fields); `comment` is the client's
// own field and is forwarded unchanged.
//
// Everything here runs only for a command that carries `$traceparent` or `comment` (CommandPeek
// records where they are during its one pass): other commands pay nothing.
import { ElementCursor, BSON_STRING, BSON_DOCUMENT, utf8 } from '../wire/index.ts';

export interface TraceParent {
  /** 32 lowercase hex characters, not all zero. */
  readonly traceId: string;
  /** 16 lowercase hex characters, not all zero. */
  readonly spanId: string;
  /** The sampled flag (bit 0 of trace-flags). */
  readonly sampled: boolean;
  /** The whole trace-flags byte. */
  readonly flags: number;
}

const HEX = /^[0-9a-f]+$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The traceparent in `s`, or the reason it is not one (a string). */
export function parseTraceparent(s: string): TraceParent | string {
  if (s.length < 55) return `expected 55 characters, got ${s.length}`;
  const version = s.slice(0, 2);
  if (!HEX.test(version) || version === 'ff') return `bad version "${version}"`;
  // Version 00 is exactly 55 characters; a later version may append fields after a dash.
  if (version === '00' ? s.length !== 55 : s.length > 55 && s[55] !== '-') return `expected 55 characters, got ${s.length}`;
  if (s[2] !== '-' || s[35] !== '-' || s[52] !== '-') return 'expected version-traceid-parentid-flags separated by dashes';
  const traceId = s.slice(3, 35);
  const spanId = s.slice(36, 52);
  const flagsHex = s.slice(53, 55);
  if (!HEX.test(traceId)) return 'trace id is not 32 lowercase hex characters';
  if (!HEX.test(spanId)) return 'parent id is not 16 lowercase hex characters';
  if (!HEX.test(flagsHex)) return 'trace flags are not 2 lowercase hex characters';
  if (traceId === ZERO_TRACE) return 'trace id is all zeros';
  if (spanId === ZERO_SPAN) return 'parent id is all zeros';
  const flags = parseInt(flagsHex, 16);
  return { traceId, spanId, flags, sampled: (flags & 1) === 1 };
}

const K_TRACEPARENT = utf8('traceparent');
/** sqlcommenter's `traceparent='<value>'` (quotes optional): the value up to a quote, comma, space or `*`. */
const SQLCOMMENTER = /traceparent='?([^',\s*]*)/;
/**
 * A whole comment that starts as a traceparent does — a 2-hex-digit version, a dash and hex digits
 * (16 at least: no word does that, while "ad-hoc" or "de-dup" start with hex digits and a dash) —
 * is meant as one, and counted as invalid when it is not valid.
 */
const TRACEPARENT_START = /^[0-9a-fA-F]{2}-[0-9a-fA-F]{16}/;

/** Where a command's trace context was found, and the text found there ('' when none). */
export class TraceContextReader {
  source: '$traceparent' | 'comment' | '' = '';
  text = '';
  private readonly cur = new ElementCursor();

  /**
   * Reads the candidate traceparent text of the command `body`: the `$traceparent` element at
   * `traceparentAt` (preferred) or the `comment` element at `commentAt` (-1: absent).
   * Returns false when neither holds one. A comment holds one only when it means to: a string
   * that starts like a traceparent (`00-` and hex digits) or has the sqlcommenter key `traceparent=`, or a
   * document with a `traceparent` string field. Any other comment ("user-lookup") is the
   * application's own and is not a traceparent attempt, so it is neither parsed nor counted.
   */
  read(body: Buffer, traceparentAt: number, commentAt: number): boolean {
    this.source = '';
    this.text = '';
    if (traceparentAt >= 0 && this.stringAt(body, traceparentAt)) {
      this.source = '$traceparent';
      return true;
    }
    if (commentAt >= 0) {
      const type = body[commentAt];
      if (type === BSON_STRING && this.stringAt(body, commentAt)) {
        if (!TRACEPARENT_START.test(this.text)) {
          const m = SQLCOMMENTER.exec(this.text);
          if (m === null) {
            this.text = '';
            return false;
          }
          this.text = m[1];
        }
        this.source = 'comment';
        return true;
      }
      if (type === BSON_DOCUMENT) {
        const valueStart = elementValueStart(body, commentAt);
        const inner = this.cur.open(body, valueStart);
        while (inner.next()) {
          if (inner.nameIs(K_TRACEPARENT) && inner.type === BSON_STRING) {
            this.text = inner.string();
            this.source = 'comment';
            return true;
          }
        }
      }
    }
    return false;
  }

  private stringAt(body: Buffer, at: number): boolean {
    if (body[at] !== BSON_STRING) return false;
    const v = elementValueStart(body, at);
    const len = body.readInt32LE(v);
    this.text = body.toString('utf8', v + 4, v + 4 + len - 1);
    return true;
  }
}

/** Offset of the value of the element whose type byte is at `at` (after its name's NUL). */
function elementValueStart(body: Buffer, at: number): number {
  return body.indexOf(0, at + 1) + 1;
}

/**
 * `body` (a validated BSON document) without the element whose type byte is at `at`: a new buffer,
 * the document length rewritten. The caller re-encodes the frame around it.
 */
export function removeElement(body: Buffer, at: number): Buffer {
  const cur = new ElementCursor().open(body, 0);
  while (cur.next()) {
    if (cur.at === at) {
      const out = Buffer.allocUnsafe(body.length - (cur.valueEnd - at));
      body.copy(out, 0, 0, at);
      body.copy(out, at, cur.valueEnd);
      out.writeInt32LE(out.length, 0);
      return out;
    }
  }
  return body;
}
