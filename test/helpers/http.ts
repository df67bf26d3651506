// A JSON call to one of the proxy's HTTP APIs with a bearer token, for tests that drive the admin
// API and the control plane of a proxy running in another process: the status and the parsed body.
export interface JsonReply {
  status: number;
  /** The parsed JSON; tests read the fields they assert. */
  body: any;
}

export async function callJson(base: string, token: string, method: string, path: string, body?: unknown): Promise<JsonReply> {
  const res = await fetch(`${base}${path}`, {
    method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
