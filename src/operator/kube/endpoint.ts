/**
 * Where the operator reaches a Holt's store: the URL, and the CA to verify it by when the bundled
 * stores serve TLS (the operator talks to many Holts, each with its own CA, so NODE_EXTRA_CA_CERTS
 * cannot serve). A plain string is a URL without TLS settings of its own.
 */
export type StoreEndpoint = string | { url: string; ca?: string };

export const endpointOf = (e: StoreEndpoint): { url: string; ca?: string } =>
  typeof e === 'string' ? { url: e } : e;

/** One string that changes when either part does (a cached connection is replaced then). */
export const endpointKey = (e: StoreEndpoint): string => {
  const { url, ca } = endpointOf(e);
  return ca ? `${url}\n${ca}` : url;
};
