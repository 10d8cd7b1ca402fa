"""The image's HEALTHCHECK: healthy when serve's /livez and /readyz both answer 200.

It asks the port serve listens on (SCHEDCTL_METRICS_PORT, which the image sets and serve reads), from inside
the container, so it needs no curl and works whatever --metrics-host is (0.0.0.0 also answers on loopback).
Exit 0 healthy, 1 unhealthy, with one line saying which path answered what: `podman inspect` shows it.
"""

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    port = os.environ.get("SCHEDCTL_METRICS_PORT", "")
    if not port.isdigit() or int(port) == 0:
        print(f"SCHEDCTL_METRICS_PORT is {port!r}: serve has no health port to probe")
        return 1
    host = os.environ.get("SCHEDCTL_METRICS_HOST", "127.0.0.1")
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    for path in ("/livez", "/readyz"):
        url = f"http://{host}:{port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=3) as answer:
                status, body = answer.status, answer.read(200)
        except urllib.error.HTTPError as error:
            status, body = error.code, error.read(200)
        except OSError as error:
            print(f"{url}: {error}")
            return 1
        if status != 200:
            print(f"{url}: {status} {body.decode('utf-8', 'replace').strip()}")
            return 1
    print("live and ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
