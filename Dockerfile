# The gateway's image: `docker compose up` builds it (compose.yaml; README, "Deployment").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OMNIROUTE_DATA_DIR=/app/data \
    OMNIROUTE_STATIC_ROOT=/app/static

WORKDIR /app
COPY . .
# Installs the gateway's dependencies; manage.py runs the sources in /app (templates included).
RUN pip install --no-cache-dir . \
    && useradd --system --home-dir /app omniroute \
    && mkdir -p /app/data /app/static \
    && chown -R omniroute /app/data /app/static
USER omniroute

EXPOSE 8000
# Migrations and static files at start, then one gateway process. With several replicas on one
# database, run `manage.py migrate` once before starting them instead (README, "Upgrading").
CMD ["sh", "-c", "python manage.py migrate --noinput && python manage.py collectstatic --noinput -v 0 && exec python manage.py serve --host 0.0.0.0 --port 8000 --no-collectstatic"]
