"""Runs a fabric-rendered tensorzero.toml in TensorZero's own gateway, embedded in-process by the
`tensorzero` Python package (`TensorZeroGateway.build_embedded` parses the config and starts the
gateway exactly as the `tensorzero/gateway` image does). Used by tests/tensorzero_loader.rs.

Reads one JSON job on stdin:
  config       path of the rendered tensorzero.toml
  backends     {site: "<URL as the config names it>"}: each is replaced in the config by a
               loopback OpenAI-compatible stub answering "from <site>" (nothing leaves this
               machine): a site's `http://<service>-<site>.<ns>.svc.cluster.local:<port>/v1/`,
               or the cloud model's `api_base` (its name: "cloud")
  down         [site]: those stubs answer 500
  closed       [site]: those URLs become a loopback port nothing listens on
  bearer       the API key the cloud stub expects as `Authorization: Bearer …` (a dummy)
  valkey_url / postgres_url   the rate-limit backend (a server the test started)
  requests     [{variant?, tags?, repeat?}]: inference requests (dryrun: nothing is stored)
Prints one JSON object: {"version", "loaded", "error"?, "results": [{ok, variant, text, status, error}],
"hits": {site: requests its stub received}, "bearer_ok": {site: requests that carried `bearer`}}.
"""

import json
import os
import socket
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version


class Stub(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        site = self.server.site
        with LOCK:
            HITS[site] = HITS.get(site, 0) + 1
            if BEARER and self.headers.get("authorization") == "Bearer " + BEARER:
                BEARER_OK[site] = BEARER_OK.get(site, 0) + 1
        if site in DOWN:
            self.send_error(500, "backend down")
            return
        out = {
            "id": "stub",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "from " + self.server.site},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


DOWN = set()
HITS = {}
BEARER_OK = {}
BEARER = None
LOCK = threading.Lock()


def stub(site):
    s = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    s.site = site
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d/v1/" % s.server_address[1]


def closed_port():
    """A loopback URL whose port was free a moment ago and has no listener: connecting is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d/v1/" % port


# The gateway logs to stdout: the result goes to the real stdout, everything else to stderr.
RESULT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def emit(out):
    RESULT.write(json.dumps(out) + "\n")
    RESULT.flush()


INFERENCE_ARGS = ("function_name", "variant_name", "input", "params", "tags", "dryrun", "episode_id")


def serve(client, out):
    """Serves the embedded gateway's inference as `POST /inference` on a loopback port (the
    request's fields passed to the client as they are; the answer's fields as the gateway's
    HTTP API names them), prints {"loaded", "listening": port} and serves until killed."""
    import tensorzero

    class Gateway(BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("content-length", 0))
            req = json.loads(self.rfile.read(n) or b"{}")
            if self.path != "/inference":
                self.send_error(404)
                return
            try:
                resp = client.inference(**{k: v for k, v in req.items() if k in INFERENCE_ARGS})
                status, body = 200, {
                    "inference_id": str(resp.inference_id),
                    "episode_id": str(resp.episode_id),
                    "variant_name": resp.variant_name,
                    "content": [{"type": "text", "text": c.text} for c in resp.content if hasattr(c, "text")],
                    "usage": {"input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens},
                }
            except tensorzero.TensorZeroError as e:
                status, body = e.status_code, {"error": e.text}
            except Exception as e:
                status, body = 500, {"error": str(e)}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    s = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    out["listening"] = s.server_address[1]
    emit(out)
    s.serve_forever()


def main():
    global BEARER
    job = json.load(sys.stdin)
    DOWN.update(job.get("down", []))
    closed = set(job.get("closed", []))
    BEARER = job.get("bearer")
    out = {"version": version("tensorzero"), "loaded": False, "results": []}
    import tensorzero

    text = open(job["config"]).read()
    for site, url in job.get("backends", {}).items():
        if url not in text:
            out["error"] = "the config has no backend URL %s for %s" % (url, site)
            emit(out)
            return
        text = text.replace(url, closed_port() if site in closed else stub(site))
    cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    cfg.write(text)
    cfg.close()
    try:
        client = tensorzero.TensorZeroGateway.build_embedded(
            config_file=cfg.name,
            valkey_url=job.get("valkey_url"),
            postgres_url=job.get("postgres_url"),
        )
    except Exception as e:  # the loader's refusal is the result
        out["error"] = str(e)
        emit(out)
        return
    out["loaded"] = True
    if job.get("serve"):
        serve(client, out)
        return
    for req in job.get("requests", []):
        for _ in range(req.get("repeat", 1)):
            r = {"ok": False}
            try:
                resp = client.inference(
                    function_name=req["function"],
                    variant_name=req.get("variant"),
                    input={"messages": [{"role": "user", "content": "fabric test"}]},
                    tags=req.get("tags"),
                    dryrun=True,
                )
                r = {"ok": True, "variant": resp.variant_name, "text": resp.content[0].text}
            except tensorzero.TensorZeroError as e:
                r = {"ok": False, "status": e.status_code, "error": str(e)[:500]}
            except Exception as e:
                r = {"ok": False, "error": str(e)[:500]}
            out["results"].append(r)
    out["hits"] = HITS
    out["bearer_ok"] = BEARER_OK
    emit(out)


main()
