import { type Browser, launch } from 'puppeteer-core';

/** Headless Chromium (Debian's, installed by `make setup`), as every browser test and bench runs it. */
export const launchChromium = (): Promise<Browser> =>
  launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
