import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { REDACT_PATHS, redactUrl } from './logger.ts';

describe('secrets stay out of logs', () => {
  it.each([
    ['redis://:s3cret@host:6379/0', 'redis://:***@host:6379/0'],
    ['postgres://holt:pa/ss@db:5432/holt', 'postgres://holt:***@db:5432/holt'],
    ['postgres://holt@db:5432/holt', 'postgres://holt@db:5432/holt'],
    ['nats://127.0.0.1:4222', 'nats://127.0.0.1:4222'],
  ])('redactUrl(%s)', (input, expected) => {
    expect(redactUrl(input)).toBe(expected);
    expect(redactUrl(input)).not.toContain('s3cret');
  });

  it('redacts key-shaped fields at the top level and one level down', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = pino({ redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
    log.info({ apiKey: 'sk-top', llm: { api_key: 'sk-nested' }, db: { password: 'pw1' }, token: 't0k' }, 'x');
    const text = lines.join('');
    for (const secret of ['sk-top', 'sk-nested', 'pw1', 't0k']) expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
  });
});
