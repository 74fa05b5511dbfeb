import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';

/**
 * `/docs`: the API reference, rendered by Swagger UI from the package's own files (nothing
 * fetched from a CDN, so the page's `script-src 'self'` CSP holds) and re-branded as ours: the
 * tab and the page say "Switchboard API", the framework's top bar (its logo and the "Explore"
 * field showing /docs/json) is hidden, and the favicon is Switchboard's.
 */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2f5bea"/><path d="M9 12h14M9 20h9" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>`;

const CSS = `
.swagger-ui .topbar { display: none; }
body { margin: 0; background: #fff !important; }
.swagger-ui .information-container .info { margin: 32px 0 24px; }
/* The stock colours fall short of WCAG AA contrast; ours do not. */
.swagger-ui .info .title small { background: #3d4f66 !important; }
.swagger-ui .info .title small.version-stamp { background: #1e6b45 !important; }
.swagger-ui .info .title small pre { color: #fff; }
.swagger-ui .info .url, .swagger-ui .info a, .swagger-ui .info .link { color: #1d4ed8; }
.swagger-ui .btn.authorize, .swagger-ui .btn.authorize span { color: #1e6b45; border-color: #1e6b45; }
.swagger-ui .btn.authorize svg { fill: #1e6b45; }
.swagger-ui .opblock .opblock-summary-method { color: #fff; background: #1f5f9e !important; }
.swagger-ui .opblock.opblock-post .opblock-summary-method { background: #1e6b45 !important; }
.swagger-ui .opblock.opblock-put .opblock-summary-method { background: #8a4f00 !important; }
.swagger-ui .opblock.opblock-patch .opblock-summary-method { background: #00665c !important; }
.swagger-ui .opblock.opblock-delete .opblock-summary-method { background: #b3261e !important; }
.swagger-ui .opblock.opblock-head .opblock-summary-method { background: #5b3596 !important; }
`;

export const DOCS_PAGE: FastifySwaggerUiOptions = {
  routePrefix: '/docs',
  staticCSP: true,
  theme: {
    title: 'Switchboard API',
    css: [{ filename: 'switchboard.css', content: CSS }],
    favicon: [
      {
        filename: 'favicon.svg',
        rel: 'icon',
        type: 'image/svg+xml',
        sizes: 'any',
        content: ICON,
      },
    ],
  },
  logo: { type: 'image/svg+xml', content: ICON },
  uiConfig: { deepLinking: true, docExpansion: 'list', defaultModelsExpandDepth: 0 },
};
