// The worker's end of the socket to the server: worker.py's protocol (multiprocessing.connection
// frames: a 4-byte big-endian length, or -1 and 8 bytes; each frame a JSON header line and a raw
// body), read and written synchronously (see bootstrap.mjs for why).
import fs from 'node:fs';

export function openChannel(CHANNEL) {
  function readExactly(n) {
    const buf = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      let got;
      try {
        got = fs.readSync(CHANNEL, buf, off, n - off, null);
      } catch (e) {
        if (e.code === 'EINTR' || e.code === 'EAGAIN') continue;
        return null;
      }
      if (got === 0) return null;
      off += got;
    }
    return buf;
  }

  function receive() {
    const head = readExactly(4);
    if (head === null) return null;
    let size = head.readInt32BE(0);
    if (size === -1) {
      const long = readExactly(8);
      if (long === null) return null;
      size = Number(long.readBigUInt64BE(0));
    }
    const data = size ? readExactly(size) : Buffer.alloc(0);
    if (data === null) return null;
    const nl = data.indexOf(10);
    return [JSON.parse(data.toString('utf8', 0, nl)), data.subarray(nl + 1)];
  }

  function send(header, body = Buffer.alloc(0)) {
    const head = Buffer.from(JSON.stringify(header) + '\n');
    const size = head.length + body.length;
    let prefix;
    if (size > 0x7fffffff) {
      prefix = Buffer.alloc(12);
      prefix.writeInt32BE(-1, 0);
      prefix.writeBigUInt64BE(BigInt(size), 4);
    } else {
      prefix = Buffer.alloc(4);
      prefix.writeInt32BE(size, 0);
    }
    const data = Buffer.concat([prefix, head, body]);
    let off = 0;
    while (off < data.length) {
      try {
        off += fs.writeSync(CHANNEL, data, off);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') continue;
        process.reallyExit(1); // the server is gone
      }
    }
  }

  return { receive, send };
}

// Bytes to log events: every complete line is one event, as the Lambda platform makes of a
// runtime's output; a partial line waits for its end or for flush().
export class LineSink {
  constructor(sendEvents) {
    this.sendEvents = sendEvents;
    this.partial = Buffer.alloc(0);
  }

  write(chunk) {
    const data = this.partial.length ? Buffer.concat([this.partial, chunk]) : chunk;
    const events = [];
    const ts = Date.now();
    let start = 0;
    for (let nl = data.indexOf(10); nl !== -1; nl = data.indexOf(10, start)) {
      events.push([ts, data.toString('utf8', start, nl) + '\n']);
      start = nl + 1;
    }
    this.partial = Buffer.from(data.subarray(start));
    if (events.length) this.sendEvents(events);
  }

  flush() {
    if (this.partial.length) {
      const text = this.partial.toString('utf8');
      this.partial = Buffer.alloc(0);
      this.sendEvents([[Date.now(), text]]);
    }
  }
}
