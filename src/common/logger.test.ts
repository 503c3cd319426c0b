import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, redactUrl } from './logger.ts';

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

  it('redacts key-shaped fields at the top level and one level down, without touching the caller', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = createLogger('test', { token: 'bound-t0k' }, sink);
    const fields = {
      apiKey: 'sk-top',
      llm: { api_key: 'sk-nested', model: 'm1' },
      db: { password: 'pw1' },
      token: 't0k',
      headers: { Authorization: 'Bearer b1' },
      env: { HOLT_LLM_API_KEY: 'sk-env', PATH: '/bin' },
      keep: 'visible',
    };
    log.info(fields, 'x');
    const text = lines.join('');
    for (const secret of ['sk-top', 'sk-nested', 'pw1', 't0k', 'Bearer b1', 'sk-env', 'bound-t0k'])
      expect(text).not.toContain(secret);
    expect(text).toContain('[redacted]');
    for (const kept of ['visible', '"model":"m1"', '"PATH":"/bin"']) expect(text).toContain(kept);
    expect(fields.llm.api_key).toBe('sk-nested');
    // An error carrying a secret-named field keeps its message once scrubbed.
    const err = Object.assign(new Error('upstream refused'), { token: 'err-t0k' });
    log.error({ err }, 'failed');
    const last = lines.at(-1) ?? '';
    expect(last).toContain('upstream refused');
    expect(last).not.toContain('err-t0k');
    expect(err.token).toBe('err-t0k');
    // Frozen objects are copied, not assigned to.
    log.info({ headers: Object.freeze({ authorization: 'Bearer frozen', accept: 'json' }) }, 'frozen');
    expect(lines.at(-1)).not.toContain('Bearer frozen');
    expect(lines.at(-1)).toContain('"accept":"json"');
    expect(fields.apiKey).toBe('sk-top');
  });
});
