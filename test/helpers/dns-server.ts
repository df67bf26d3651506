// A small authoritative DNS server over UDP on 127.0.0.1 for tests: answers A, SRV and TXT
// questions from a zone the test edits while it runs (RFC 1035 §4 message format; SRV rdata
// RFC 2782). Names it has no records for get NXDOMAIN; a known name without records of the asked
// type gets an empty NOERROR answer (what resolvers report as ENODATA). `fail = true` answers
// SERVFAIL to everything. Written by hand (about a hundred lines) rather than adding a
// DNS-packet dependency for one test.
import { createSocket, type Socket } from 'node:dgram';

export interface SrvTarget { target: string; port: number; priority?: number; weight?: number }

export interface DnsZone {
  a: Map<string, string[]>;
  srv: Map<string, SrvTarget[]>;
  /** Each entry is one TXT record: its character strings in order. */
  txt: Map<string, string[][]>;
}

const TYPE_A = 1;
const TYPE_TXT = 16;
const TYPE_SRV = 33;
const CLASS_IN = 1;
const TTL = 5;

function encodeName(name: string): Buffer {
  const parts = name.replace(/\.$/, '').split('.').filter((p) => p.length > 0);
  const bufs = parts.map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p, 'ascii')]));
  return Buffer.concat([...bufs, Buffer.from([0])]);
}

/** The question's name, type and where it ends. */
function readQuestion(msg: Buffer): { name: string; type: number; end: number } {
  let off = 12;
  const labels: string[] = [];
  while (msg[off] !== 0) {
    const len = msg[off];
    labels.push(msg.toString('ascii', off + 1, off + 1 + len));
    off += 1 + len;
  }
  off += 1;
  return { name: labels.join('.').toLowerCase(), type: msg.readUInt16BE(off), end: off + 4 };
}

function record(name: string, type: number, rdata: Buffer): Buffer {
  const head = Buffer.alloc(10);
  head.writeUInt16BE(type, 0);
  head.writeUInt16BE(CLASS_IN, 2);
  head.writeUInt32BE(TTL, 4);
  head.writeUInt16BE(rdata.length, 8);
  return Buffer.concat([encodeName(name), head, rdata]);
}

export class TestDnsServer {
  readonly zone: DnsZone = { a: new Map(), srv: new Map(), txt: new Map() };
  /** Every question asked, as "type name" (e.g. "SRV _mongodb._tcp.x.test"). */
  readonly questions: string[] = [];
  fail = false;
  private readonly socket: Socket = createSocket('udp4');

  async start(): Promise<string> {
    this.socket.on('message', (msg, rinfo) => {
      const reply = this.answer(msg);
      if (reply !== null) this.socket.send(reply, rinfo.port, rinfo.address);
    });
    await new Promise<void>((resolve) => this.socket.bind(0, '127.0.0.1', resolve));
    return `127.0.0.1:${this.socket.address().port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  private answer(msg: Buffer): Buffer | null {
    if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return null;
    const q = readQuestion(msg);
    this.questions.push(`${q.type === TYPE_SRV ? 'SRV' : q.type === TYPE_TXT ? 'TXT' : q.type === TYPE_A ? 'A' : String(q.type)} ${q.name}`);
    const answers: Buffer[] = [];
    const known = this.zone.a.has(q.name) || this.zone.srv.has(q.name) || this.zone.txt.has(q.name);
    if (q.type === TYPE_A) {
      for (const ip of this.zone.a.get(q.name) ?? []) answers.push(record(q.name, TYPE_A, Buffer.from(ip.split('.').map(Number))));
    } else if (q.type === TYPE_SRV) {
      for (const s of this.zone.srv.get(q.name) ?? []) {
        const fixed = Buffer.alloc(6);
        fixed.writeUInt16BE(s.priority ?? 0, 0);
        fixed.writeUInt16BE(s.weight ?? 5, 2);
        fixed.writeUInt16BE(s.port, 4);
        answers.push(record(q.name, TYPE_SRV, Buffer.concat([fixed, encodeName(s.target)])));
      }
    } else if (q.type === TYPE_TXT) {
      for (const strings of this.zone.txt.get(q.name) ?? []) {
        answers.push(record(q.name, TYPE_TXT, Buffer.concat(strings.map((s) => Buffer.concat([Buffer.from([s.length]), Buffer.from(s, 'utf8')])))));
      }
    }
    const rcode = this.fail ? 2 : known ? 0 : 3;
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0);
    // QR, opcode 0, AA, RD as asked, RA, rcode.
    header.writeUInt16BE(0x8000 | 0x0400 | (msg.readUInt16BE(2) & 0x0100) | 0x0080 | rcode, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(this.fail ? 0 : answers.length, 6);
    return Buffer.concat([header, msg.subarray(12, q.end), ...(this.fail ? [] : answers)]);
  }
}
