// The document is the one this service serves, as JSON; "Try it out" sends
// requests to this origin with the token given under "Authorize".
window.ui = SwaggerUIBundle({
  url: "../schema/?format=json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
