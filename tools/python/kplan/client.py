"""A small client of `kplan serve` (or any OpenAI-compatible server), standard library only.

    from kplan.client import Client
    c = Client("http://127.0.0.1:8000")                 # api_key=None
    r = c.completions("def f(x):", max_tokens=32, temperature=0)
    print(r["choices"][0]["text"])
    for piece in c.chat([{"role": "user", "content": "Hi"}], stream=True, max_tokens=64):
        print(piece, end="", flush=True)                # the text, as the server streams it

Errors (an HTTP status other than 200) raise ServerError with the status and the server's
{"error": {...}} object."""
import http.client
import json
import urllib.parse


class ServerError(Exception):
    def __init__(self, status, error):
        self.status = status
        self.error = error
        super().__init__("HTTP %d: %s" % (status, error.get("message", error) if isinstance(error, dict) else error))


class Client:
    def __init__(self, base_url="http://127.0.0.1:8000", api_key=None, timeout=600):
        u = urllib.parse.urlparse(base_url)
        if u.scheme != "http":
            raise ValueError("kplan.client speaks plain http, not %r" % u.scheme)
        self.host, self.port, self.timeout, self.api_key = u.hostname, u.port or 80, timeout, api_key

    def _request(self, method, path, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        resp = conn.getresponse()
        if resp.status != 200:
            data = resp.read()
            conn.close()
            try:
                raise ServerError(resp.status, json.loads(data).get("error", {}))
            except ValueError:
                raise ServerError(resp.status, data.decode("utf-8", "replace")) from None
        return conn, resp

    def _json(self, method, path, body=None):
        conn, resp = self._request(method, path, body)
        try:
            return json.loads(resp.read())
        finally:
            conn.close()

    def _events(self, path, body):
        """The `data:` events of a streamed response as dicts, until `data: [DONE]`."""
        conn, resp = self._request("POST", path, body)
        try:
            for line in resp:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue
                if not line.startswith(b"data: "):
                    raise ServerError(200, "not a server-sent event: %r" % line)
                data = line[6:]
                if data == b"[DONE]":
                    return
                event = json.loads(data)
                if "error" in event:
                    raise ServerError(200, event["error"])
                yield event
        finally:
            conn.close()

    def health(self):
        return self._json("GET", "/health")

    def models(self):
        return self._json("GET", "/v1/models")

    def completions(self, prompt, stream=False, **options):
        """POST /v1/completions: the response dict, or with stream=True an iterator of text pieces."""
        body = dict(options, prompt=prompt)
        if not stream:
            return self._json("POST", "/v1/completions", body)
        body["stream"] = True
        return (e["choices"][0]["text"] for e in self._events("/v1/completions", body) if e["choices"])

    def chat(self, messages, stream=False, **options):
        """POST /v1/chat/completions: the response dict, or with stream=True an iterator of text pieces."""
        body = dict(options, messages=messages)
        if not stream:
            return self._json("POST", "/v1/chat/completions", body)
        body["stream"] = True
        return (e["choices"][0]["delta"].get("content", "")
                for e in self._events("/v1/chat/completions", body) if e["choices"])

    def events(self, path, body):
        """The raw streamed chunks (dicts) of a request with "stream": true."""
        return self._events(path, dict(body, stream=True))
