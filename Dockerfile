# The gateway's image: `docker compose up` builds it (compose.yaml; docs/deploying.md).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OMNIROUTE_DATA_DIR=/app/data \
    OMNIROUTE_STATIC_ROOT=/app/static

WORKDIR /app
# The dependencies first, in a layer of their own: it is rebuilt only when pyproject.toml
# changes, not on every change to the code.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt
# Then the code, and the project itself without its (already installed) dependencies;
# manage.py runs the sources in /app (templates included).
COPY . .
RUN pip install --no-cache-dir --no-deps . \
    && useradd --system --home-dir /app omniroute \
    && mkdir -p /app/data /app/static \
    && chown -R omniroute /app/data /app/static
USER omniroute

EXPOSE 8000
# One gateway process; `serve` collects the static files first. Migrations are not run here:
# compose's one-shot `migrate` service runs them once before any gateway starts, and a
# deployment without compose runs `manage.py migrate` once per upgrade (docs/deploying.md).
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
