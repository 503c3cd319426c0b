import { describe, expect, it } from 'vitest';
import { Callback, shownTarget } from './callback.ts';

describe('callbacks', () => {
  it('takes an http(s) URL without credentials or nats:<tool>; refuses the rest', () => {
    expect(Callback.safeParse({ name: 'ci', url: 'https://ci.example/hooks/holt' }).success).toBe(true);
    expect(Callback.safeParse({ name: 'svc', url: 'nats:builder' }).success).toBe(true);
    for (const url of ['https://u:p@ci.example/', 'ftp://ci.example/', 'nats:', 'nats:a.b', 'not a url'])
      expect(Callback.safeParse({ name: 'x', url }).success, url).toBe(false);
  });

  it("shows a tool service's subject whole and only an URL's host (its path may hold the receiver's secret)", () => {
    expect(shownTarget('nats:builder')).toBe('nats:builder');
    expect(shownTarget('https://ci.example:8443/hooks/s3cr3t')).toBe('ci.example:8443');
  });
});
